//! Power loss, simulated, as redb and etcd test themselves: a redb [`StorageBackend`] in memory
//! that keeps what was synced apart from what was only written, so a test can cut the power at
//! any operation and boot again on what a disk could hold then — everything synced, plus none,
//! some, or a torn part of the writes that were not.
//!
//! A killed process cannot show a missing or misplaced fsync (the page cache outlives it); this
//! can. [`run`] plays a [`Workload`] on a store over a [`Disk`] until the power goes, and
//! [`check_recovery`] boots a store on what survived and holds it to the contract: it opens,
//! every acknowledged write is there, at most the one write in flight beyond them, every
//! surviving object is served, and it takes new writes. The crash test and the `power_loss`
//! fuzz target both drive it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use redb::StorageBackend;

use crate::{ListOptions, Revision, Store, StoreError};

/// A disk in memory that loses power when told to.
#[derive(Debug, Clone, Default)]
pub struct Disk(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    /// What reads see: every operation so far.
    visible: Vec<u8>,
    /// What a power loss keeps for sure: the state at the last sync.
    durable: Vec<u8>,
    /// The operations since the last sync, in order, with the one the power cut short.
    unsynced: Vec<Unsynced>,
    /// Writes, resizes and syncs done so far.
    operations: u64,
    /// The operation (counted from 1) at which the power goes.
    cut_at: Option<u64>,
    /// No power: every operation fails.
    dead: bool,
}

#[derive(Debug, Clone)]
enum Unsynced {
    Write { offset: u64, data: Vec<u8> },
    Resize(u64),
}

/// Which of the writes not yet synced a disk still holds when it boots again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Survivors {
    /// None: the disk's cache was lost whole.
    None,
    /// The first `whole` in order, then `torn` bytes of the next: a write cut part way.
    Prefix {
        /// Operations kept whole.
        whole: usize,
        /// Bytes kept of the next write.
        torn: usize,
    },
    /// Any of them, in any order, each kept whole, torn or lost as `seed` picks: a disk
    /// that reorders its cache.
    Random(u64),
}

fn power_lost() -> std::io::Error {
    std::io::Error::other("the power is off")
}

/// Applies one operation to an image of the disk.
fn apply(image: &mut Vec<u8>, operation: &Unsynced, keep: usize) {
    match operation {
        Unsynced::Resize(len) => image.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        Unsynced::Write { offset, data } => {
            let Ok(start) = usize::try_from(*offset) else { return };
            let data = data.get(..keep.min(data.len())).unwrap_or_default();
            let end = start.saturating_add(data.len());
            if image.len() < end {
                image.resize(end, 0);
            }
            if let Some(target) = image.get_mut(start..end) {
                target.copy_from_slice(data);
            }
        }
    }
}

/// A small deterministic generator (xorshift), so a seed names one outcome.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.checked_rem(sides).unwrap_or(0)
    }
}

impl Disk {
    /// An empty disk with power.
    pub fn new() -> Disk {
        Disk::default()
    }

    /// A disk holding a new, empty store, synced and closed: what [`super::open`] leaves in a
    /// data directory, where the file appears whole or not at all (it is created under another
    /// name and renamed), so power cuts during its creation need no recovery.
    pub fn formatted() -> Result<Disk, StoreError> {
        let disk = Disk::new();
        drop(super::open_on(disk.clone(), 1)?);
        Ok(disk.reboot(Survivors::None))
    }

    /// This disk, whose power goes at its `operation`th operation from now (counted from 1;
    /// writes, resizes and syncs count): that operation fails, is kept as the write in flight,
    /// and every later one fails too.
    pub fn with_power_cut_at(self, operation: u64) -> Disk {
        {
            let mut state = self.state();
            state.cut_at = Some(state.operations.saturating_add(operation));
        }
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Operations done so far (the one the power cut short included).
    pub fn operations(&self) -> u64 {
        self.state().operations
    }

    /// Whether the power went.
    pub fn power_lost(&self) -> bool {
        self.state().dead
    }

    /// The operations since the last sync, the one in flight included.
    pub fn unsynced(&self) -> usize {
        self.state().unsynced.len()
    }

    /// The disk as it boots again, powered: what was synced, plus `survivors` of the rest.
    pub fn reboot(&self, survivors: Survivors) -> Disk {
        let state = self.state();
        let mut image = state.durable.clone();
        match survivors {
            Survivors::None => {}
            Survivors::Prefix { whole, torn } => {
                for operation in state.unsynced.iter().take(whole) {
                    apply(&mut image, operation, usize::MAX);
                }
                if let Some(operation) = state.unsynced.get(whole) {
                    apply(&mut image, operation, torn);
                }
            }
            Survivors::Random(seed) => {
                let mut dice = Dice(seed | 1);
                let mut order: Vec<&Unsynced> = state.unsynced.iter().collect();
                for index in (1..order.len()).rev() {
                    order.swap(index, usize::try_from(dice.roll((index as u64).saturating_add(1))).unwrap_or(0));
                }
                for operation in order {
                    let len = match operation {
                        Unsynced::Write { data, .. } => data.len(),
                        Unsynced::Resize(_) => 0,
                    };
                    match dice.roll(3) {
                        0 => {}
                        1 => apply(&mut image, operation, usize::MAX),
                        _ => apply(&mut image, operation, usize::try_from(dice.roll(len as u64)).unwrap_or(0)),
                    }
                }
            }
        }
        Disk(Arc::new(Mutex::new(State { visible: image.clone(), durable: image, ..State::default() })))
    }
}

impl State {
    /// Counts an operation; false once the power is off (and for the operation that cuts it).
    fn powered(&mut self, operation: Option<Unsynced>) -> bool {
        if self.dead {
            return false;
        }
        self.operations = self.operations.saturating_add(1);
        if self.cut_at == Some(self.operations) {
            self.dead = true;
            self.unsynced.extend(operation);
            return false;
        }
        if let Some(operation) = operation {
            apply(&mut self.visible, &operation, usize::MAX);
            self.unsynced.push(operation);
        }
        true
    }
}

impl StorageBackend for Disk {
    fn len(&self) -> std::io::Result<u64> {
        let state = self.state();
        if state.dead {
            return Err(power_lost());
        }
        Ok(state.visible.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let state = self.state();
        if state.dead {
            return Err(power_lost());
        }
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        let end = start.saturating_add(out.len());
        let bytes = state
            .visible
            .get(start..end)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past the end of the disk"))?;
        out.copy_from_slice(bytes);
        Ok(())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        match self.state().powered(Some(Unsynced::Resize(len))) {
            true => Ok(()),
            false => Err(power_lost()),
        }
    }

    fn sync_data(&self) -> std::io::Result<()> {
        let mut state = self.state();
        if !state.powered(None) {
            return Err(power_lost());
        }
        state.durable = state.visible.clone();
        state.unsynced.clear();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        match self.state().powered(Some(Unsynced::Write { offset, data: data.to_vec() })) {
            true => Ok(()),
            false => Err(power_lost()),
        }
    }
}

/// One write of a [`Workload`], on one of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create the key (refused, and so skipped, if it exists).
    Create(String, Vec<u8>),
    /// Replace the key's value, comparing on the revision last read (skipped if it is gone).
    Update(String, Vec<u8>),
    /// Delete the key (skipped if it is gone).
    Delete(String),
}

/// A scripted sequence of writes and the history window of the store they run on.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The writes, in order, each waited for.
    pub steps: Vec<Step>,
    /// How many revisions of history the store keeps: small, so compaction runs.
    pub window: Revision,
}

impl Workload {
    /// Creates, updates (values of one byte to several pages) and deletes of a dozen keys, long
    /// enough for compaction to remove revisions many times.
    pub fn scripted() -> Workload {
        let mut steps = Vec::new();
        for round in 0..4u8 {
            for key in 0..12u8 {
                let name = format!("/registry/things/{key:02}");
                let size = match (key.wrapping_add(round)) % 4 {
                    0 => 1,
                    1 => 300,
                    2 => 5_000,
                    _ => 20_000,
                };
                match (round, key % 3) {
                    (0, _) => steps.push(Step::Create(name, vec![key; size])),
                    (_, 0) if round % 2 == 1 => steps.push(Step::Delete(name)),
                    (_, 0) => steps.push(Step::Create(name, vec![round; size])),
                    _ => steps.push(Step::Update(name, vec![round.wrapping_mul(key); size])),
                }
            }
        }
        Workload { steps, window: 8 }
    }

    /// A workload read from arbitrary bytes (the fuzz target's input): each pair of bytes is one
    /// step on one of eight keys.
    pub fn from_bytes(bytes: &[u8]) -> Workload {
        let steps = bytes
            .chunks_exact(2)
            .map(|pair| {
                let (op, arg) = (pair.first().copied().unwrap_or(0), pair.get(1).copied().unwrap_or(0));
                let name = format!("/registry/things/{}", op % 8);
                let size = usize::from(arg).saturating_mul(usize::from(arg % 64)).saturating_add(1);
                match (op / 8) % 3 {
                    0 => Step::Create(name, vec![arg; size]),
                    1 => Step::Update(name, vec![arg; size]),
                    _ => Step::Delete(name),
                }
            })
            .collect();
        Workload { steps, window: 4 }
    }
}

/// What a run left: the disk, and what the store had acknowledged when the power went.
#[derive(Debug)]
pub struct Trial {
    /// The disk as the power left it.
    pub disk: Disk,
    /// Every key's value after the last acknowledged write.
    pub acknowledged: BTreeMap<String, Vec<u8>>,
    /// The revision of the last acknowledged write.
    pub revision: Revision,
    /// The state had the write in flight when the power went been committed.
    pub in_flight: Option<BTreeMap<String, Vec<u8>>>,
    /// How many writes were acknowledged.
    pub writes: usize,
}

/// The state after `step`, or `None` if the step does nothing there.
fn after(state: &BTreeMap<String, Vec<u8>>, step: &Step) -> Option<BTreeMap<String, Vec<u8>>> {
    let mut next = state.clone();
    match step {
        Step::Create(key, value) if !state.contains_key(key) => next.insert(key.clone(), value.clone()),
        Step::Update(key, value) if state.contains_key(key) => next.insert(key.clone(), value.clone()),
        Step::Delete(key) if state.contains_key(key) => next.remove(key),
        _ => return None,
    };
    Some(next)
}

/// Plays `workload` on a new store over `disk` until it ends or the power goes.
pub async fn run(workload: &Workload, disk: Disk) -> Trial {
    let mut trial =
        Trial { disk: disk.clone(), acknowledged: BTreeMap::new(), revision: 0, in_flight: None, writes: 0 };
    let Ok(store) = super::open_on(disk, workload.window) else { return trial };
    let mut revisions: BTreeMap<String, Revision> = BTreeMap::new();
    for step in &workload.steps {
        let Some(next) = after(&trial.acknowledged, step) else { continue };
        let written = match step {
            Step::Create(key, value) => store.create(key, value.clone()).await.map(|entry| entry.mod_revision),
            Step::Update(key, value) => {
                let expected = revisions.get(key).copied().unwrap_or_default();
                store.update(key, value.clone(), expected).await.map(|entry| entry.mod_revision)
            }
            Step::Delete(key) => store.delete(key, revisions.get(key).copied()).await.map(|event| event.revision),
        };
        match written {
            Ok(revision) => {
                match step {
                    Step::Create(key, _) | Step::Update(key, _) => revisions.insert(key.clone(), revision),
                    Step::Delete(key) => revisions.remove(key),
                };
                trial.acknowledged = next;
                trial.revision = revision;
                trial.writes = trial.writes.saturating_add(1);
            }
            Err(_) => {
                trial.in_flight = Some(next);
                break;
            }
        }
    }
    trial
}

/// Boots a store on what `survivors` leave of the trial's disk and checks the contract: it
/// opens; it holds every acknowledged write and at most the write in flight besides; every
/// object it lists it also serves by key; its revision did not go back; and it takes a new
/// write that a second boot finds again.
pub async fn check_recovery(trial: &Trial, survivors: Survivors, window: Revision) -> Result<(), String> {
    let disk = trial.disk.reboot(survivors);
    let store = super::open_on(disk.clone(), window).map_err(|err| format!("the store does not open: {err}"))?;
    let listed = store
        .list(ListOptions { prefix: "/", ..Default::default() })
        .await
        .map_err(|err| format!("the store does not list: {err}"))?;
    let found: BTreeMap<String, Vec<u8>> = listed.entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
    if found != trial.acknowledged && Some(&found) != trial.in_flight.as_ref() {
        let keys = |state: &BTreeMap<String, Vec<u8>>| state.keys().cloned().collect::<Vec<_>>();
        return Err(format!(
            "after {} acknowledged writes the store holds {:?}, not the acknowledged {:?}",
            trial.writes,
            keys(&found),
            keys(&trial.acknowledged)
        ));
    }
    for entry in &listed.entries {
        let got = store.get(&entry.key).await.map_err(|err| format!("get {}: {err}", entry.key))?;
        if got.as_ref() != Some(entry) {
            return Err(format!("{} is listed but served as {got:?}", entry.key));
        }
    }
    if listed.revision < trial.revision {
        return Err(format!("the revision went back from {} to {}", trial.revision, listed.revision));
    }
    let marker = "/registry/after-reboot";
    let written = store.create(marker, b"up".to_vec()).await.map_err(|err| format!("no write after boot: {err}"))?;
    drop(store);
    let again = super::open_on(disk, window).map_err(|err| format!("a second boot fails: {err}"))?;
    match again.get(marker).await {
        Ok(Some(entry)) if entry.mod_revision == written.mod_revision => Ok(()),
        other => Err(format!("the write after boot is lost on the next: {other:?}")),
    }
}
