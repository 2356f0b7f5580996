//! The API server's store: bytes under keys, one global revision, compare-and-swap writes,
//! watch from a revision, and a bounded history window.
//!
//! The data model is etcd's, which kube-apiserver is built on: every successful write bumps one
//! global [`Revision`]; each [`Entry`] records the revision that created it and the one that last
//! modified it (its `resourceVersion`); writes compare on that revision; [`Store::watch`]
//! delivers every [`Event`] after a revision, in order; [`Store::list`] reads a prefix at the
//! current revision or at an older one still inside the history window, in pages. Revisions that
//! fell out of the window are compacted: reading or watching at them fails with
//! [`StoreError::Compacted`], which the server turns into `410 Gone` / `Expired`.
//!
//! The store knows nothing about Kubernetes objects, schemas or versions; the server stores JSON
//! and converts it.
//!
//! Backends implement [`Store`]; the embedded ones share one engine ([`local::LocalStore`]) over a
//! narrow [`local::Backend`]:
//! - [`redb`](crate::redb::RedbBackend), on disk and durable: a write is acknowledged only after
//!   the transaction holding it is committed with fsync. Concurrent writes are batched into one
//!   commit (group commit), so many clients share one fsync.
//! - [`memory`](crate::memory::MemoryBackend), for tests and `--in-memory`.
//!
//! Durability is tested below the file system too: [`redb::power_loss`] is a disk that loses
//! power on purpose, keeping synced writes and none, a torn part or a random choice of the
//! rest, on which a crash test and a fuzz target check that every acknowledged write survives.
//!
//! [`etcd`] (feature `etcd`) implements [`Store`] on etcd directly, as kube-apiserver does, so
//! several servers can share one state; [`cache::CachedStore`] puts kube-apiserver's watch cache
//! in front of any store. [`dry_run::DryRun`] answers writes as a store would and applies
//! none: a request's `dryRun=All` writes to it.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use crdctl_storage::{Store, memory};
//! let store = memory::open();
//! let created = store.create("/a", b"1".to_vec()).await.unwrap();
//! let updated = store.update("/a", b"2".to_vec(), created.mod_revision).await.unwrap();
//! assert!(updated.mod_revision > created.mod_revision);
//! assert!(store.update("/a", b"3".to_vec(), created.mod_revision).await.is_err());
//! # });
//! ```

// Revisions and counts come from clients (a `resourceVersion`) and from disk: no overflow may
// panic or wrap unnoticed here.
#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

pub mod cache;
pub mod dry_run;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod local;
pub mod memory;
pub mod peers;
pub mod redb;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// The store's global logical clock; the `resourceVersion` of Kubernetes objects.
pub type Revision = u64;

/// A value under a key, with the revisions that created and last modified it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The stored bytes.
    pub value: Vec<u8>,
    /// The revision of the write that created the key.
    pub create_revision: Revision,
    /// The revision of the last write to the key.
    pub mod_revision: Revision,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted.
    Delete,
}

/// One committed write, as watches deliver it. (The redb backend reads `revision`, `kind` and
/// `key` of a stored event without the rest: they stay the first fields.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The revision of the write.
    pub revision: Revision,
    /// Put or delete.
    pub kind: EventKind,
    /// The key.
    pub key: String,
    /// The entry after a put; `None` after a delete.
    pub entry: Option<Entry>,
    /// The entry before the write, if the key existed.
    pub prev: Option<Entry>,
}

/// A write with its precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Create `key`; fails with [`StoreError::AlreadyExists`] if it exists.
    Create {
        /// The key.
        key: String,
        /// The value.
        value: Vec<u8>,
    },
    /// Replace `key` if its `mod_revision` is `expected`.
    Update {
        /// The key.
        key: String,
        /// The value.
        value: Vec<u8>,
        /// The `mod_revision` the caller read.
        expected: Revision,
    },
    /// Delete `key`, if its `mod_revision` is `expected` when given.
    Delete {
        /// The key.
        key: String,
        /// The `mod_revision` the caller read, if it must match.
        expected: Option<Revision>,
    },
}

impl Write {
    /// The key written.
    pub fn key(&self) -> &str {
        match self {
            Write::Create { key, .. } | Write::Update { key, .. } | Write::Delete { key, .. } => key,
        }
    }
}

/// What to list.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListOptions<'a> {
    /// Keys starting with this.
    pub prefix: &'a str,
    /// Only keys after this one (the continuation of an earlier page).
    pub start_after: Option<&'a str>,
    /// At most this many entries; 0 means all.
    pub limit: usize,
    /// Read at this revision instead of the current one; it must be inside the history window.
    pub revision: Option<Revision>,
    /// Without `revision`: any state at or after this revision will do (Kubernetes'
    /// `resourceVersion="0"` and `NotOlderThan`), so a [`cache`] may answer. Stores that always
    /// read the current state ignore it.
    pub min_revision: Option<Revision>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// Entries in key order.
    pub entries: Vec<Entry>,
    /// The revision the page was read at; later pages must be read at the same one.
    pub revision: Revision,
    /// Whether more entries follow the last one.
    pub more: bool,
    /// When `more`: about how many entries follow the page (counted at the current revision,
    /// so an estimate for pages read at an older one), as Kubernetes' `remainingItemCount`.
    pub remaining: u64,
}

/// Counts describing the store, for `crdctl store stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// The current revision.
    pub revision: Revision,
    /// The oldest revision still readable.
    pub compacted: Revision,
    /// The number of keys.
    pub keys: u64,
    /// The total size of the values, in bytes.
    pub value_bytes: u64,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The key does not exist.
    #[error("key {key} not found")]
    NotFound {
        /// The key.
        key: String,
    },
    /// The key exists already.
    #[error("key {key} already exists")]
    AlreadyExists {
        /// The key.
        key: String,
    },
    /// The key's `mod_revision` is not the expected one.
    #[error("key {key} was modified: revision {current}, expected {expected}")]
    Conflict {
        /// The key.
        key: String,
        /// The revision the caller expected.
        expected: Revision,
        /// The key's current `mod_revision`.
        current: Revision,
    },
    /// The revision is older than the history window.
    #[error("required revision {requested} has been compacted (oldest available: {compacted})")]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The oldest revision still available.
        compacted: Revision,
    },
    /// The revision has not been reached yet.
    #[error("revision {requested} is newer than the current revision {current}")]
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The current revision.
        current: Revision,
    },
    /// The store cannot be reached or cannot write; nothing was written.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A write's answer did not arrive in time: it may or may not have been applied (never in
    /// part).
    #[error("store timeout: {0}")]
    Timeout(String),
    /// The store refused the write as too large (etcd's `--max-request-bytes`); nothing was
    /// written.
    #[error("{0}")]
    TooLarge(String),
    /// Stored bytes could not be decoded.
    #[error("store corrupt: {0}")]
    Corrupt(String),
}

/// A stream of events, in revision order, until the store closes it or the receiver is dropped.
#[derive(Debug)]
pub struct Watch {
    events: tokio::sync::mpsc::Receiver<Result<Event, StoreError>>,
}

impl Watch {
    /// A watch fed by `events`; backends make these.
    pub fn new(events: tokio::sync::mpsc::Receiver<Result<Event, StoreError>>) -> Watch {
        Watch { events }
    }

    /// The next event; `None` when the watch has ended. An error ends the watch.
    pub async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        self.events.recv().await
    }
}

/// A key-value store with etcd's semantics; see the crate docs.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The entry under `key`, read at the current revision.
    async fn get(&self, key: &str) -> Result<Option<Entry>, StoreError>;

    /// One page of the entries under a prefix.
    async fn list(&self, options: ListOptions<'_>) -> Result<ListPage, StoreError>;

    /// Applies one write if its precondition holds; returns its event once it is durable.
    async fn write(&self, write: Write) -> Result<Event, StoreError>;

    /// Every event under `prefix` with a revision greater than `after`.
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch, StoreError>;

    /// The current revision.
    async fn revision(&self) -> Result<Revision, StoreError>;

    /// Counts for `crdctl store stats`.
    async fn stats(&self) -> Result<Stats, StoreError>;

    /// Whether other processes may write this store too (etcd), so that background work must
    /// be coordinated between them; an embedded store belongs to one process.
    fn shared(&self) -> bool {
        false
    }

    /// Creates `key`.
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Entry, StoreError> {
        let event = self.write(Write::Create { key: key.to_string(), value }).await?;
        event.entry.ok_or_else(|| StoreError::Corrupt("a create produced no entry".into()))
    }

    /// Replaces `key` if it was last modified at `expected`.
    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Entry, StoreError> {
        let event = self.write(Write::Update { key: key.to_string(), value, expected }).await?;
        event.entry.ok_or_else(|| StoreError::Corrupt("an update produced no entry".into()))
    }

    /// Deletes `key`, comparing on `expected` when given; returns the delete's event.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Event, StoreError> {
        self.write(Write::Delete { key: key.to_string(), expected }).await
    }
}
