//! The in-memory backend: the same engine as on disk, with nothing made durable.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::RwLock;

use crate::local::{Backend, Commit, DEFAULT_HISTORY_WINDOW, LocalStore, Meta, Snapshot};
use crate::{Entry, Event, EventKind, Revision, StoreError};

/// A store held in memory, lost when the process ends.
pub type MemoryStore = LocalStore<MemoryBackend>;

/// Opens an empty in-memory store with the default history window.
pub fn open() -> MemoryStore {
    open_with_window(DEFAULT_HISTORY_WINDOW)
}

/// Opens an empty in-memory store keeping `window` revisions of history.
#[expect(clippy::expect_used, reason = "opening reads the backend's counters, which in memory cannot fail")]
pub fn open_with_window(window: Revision) -> MemoryStore {
    LocalStore::new(MemoryBackend::default(), window).expect("an in-memory store always opens")
}

/// State and history in ordered maps behind one lock.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    meta: Meta,
    entries: BTreeMap<String, Entry>,
    history: BTreeMap<Revision, Event>,
}

impl MemoryBackend {
    fn read(&self) -> Result<std::sync::RwLockReadGuard<'_, State>, StoreError> {
        self.state.read().map_err(|_| StoreError::Unavailable("the in-memory store is poisoned".into()))
    }
}

impl State {
    fn history_after(&self, prefix: &str, start_after: Option<&str>, after: Revision) -> Vec<Event> {
        self.history
            .range((Bound::Excluded(after), Bound::Unbounded))
            .map(|(_, event)| event)
            .filter(|event| event.key.starts_with(prefix) && start_after.is_none_or(|start| event.key.as_str() > start))
            .cloned()
            .collect()
    }
}

impl Backend for MemoryBackend {
    fn meta(&self) -> Result<Meta, StoreError> {
        Ok(self.read()?.meta)
    }

    fn get(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        Ok(self.read()?.entries.get(key).cloned())
    }

    fn snapshot(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        history_after: Option<Revision>,
    ) -> Result<Snapshot, StoreError> {
        let state = self.read()?;
        let start = match start_after {
            Some(after) if after >= prefix => Bound::Excluded(after.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let take = if limit == 0 { usize::MAX } else { limit };
        let mut keys = state.entries.range((start, Bound::Unbounded)).take_while(|(key, _)| key.starts_with(prefix));
        let entries = keys.by_ref().take(take).map(|(_, entry)| entry.clone()).collect();
        let rest = keys.count() as u64;
        let history = history_after.map(|after| state.history_after(prefix, start_after, after)).unwrap_or_default();
        Ok(Snapshot { meta: state.meta, entries, rest, history })
    }

    fn history(&self, prefix: &str, after: Revision) -> Result<(Meta, Vec<Event>), StoreError> {
        let state = self.read()?;
        Ok((state.meta, state.history_after(prefix, None, after)))
    }

    fn commit(&self, commit: &Commit<'_>) -> Result<(), StoreError> {
        let mut state =
            self.state.write().map_err(|_| StoreError::Unavailable("the in-memory store is poisoned".into()))?;
        for event in commit.events {
            match (&event.kind, &event.entry) {
                (EventKind::Put, Some(entry)) => state.entries.insert(event.key.clone(), entry.clone()),
                _ => state.entries.remove(&event.key),
            };
            state.history.insert(event.revision, event.clone());
        }
        state.history = state.history.split_off(&commit.meta.compacted.saturating_add(1));
        state.meta = commit.meta;
        Ok(())
    }

    fn totals(&self) -> Result<(u64, u64), StoreError> {
        let state = self.read()?;
        Ok((state.entries.len() as u64, state.entries.values().map(|entry| entry.value.len() as u64).sum()))
    }
}
