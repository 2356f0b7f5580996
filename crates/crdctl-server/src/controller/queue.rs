//! client-go's work queue, as every kube-controller-manager controller runs on it: a key added
//! while it waits is queued once; a key being worked on is not handed to a second worker, and
//! if it was added meanwhile it is handed out again when the first is done; a key whose work
//! failed comes back after a wait that doubles with each failure in a row
//! (`ItemExponentialFailureRateLimiter`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::ApiError;

/// The first wait after a failure; it doubles up to [`MAX_BACKOFF`].
const BASE_BACKOFF: Duration = Duration::from_millis(5);
/// The longest wait after failures (client-go's is 1000 s; a test cluster has no thundering
/// herd to spare, and a test waits for what a retry finishes).
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What a worker did with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Done until the key is added again.
    Done,
    /// Look again after this long (something outside the store is awaited, such as another
    /// controller removing a finalizer).
    After(Duration),
}

/// Keys waiting for a worker.
pub struct Queue<K> {
    state: Mutex<State<K>>,
    ready: Notify,
}

struct State<K> {
    /// Keys in the order they will be handed out; each also in `dirty`.
    waiting: VecDeque<K>,
    /// Keys to be worked on (waiting, or added again while being worked on).
    dirty: HashSet<K>,
    /// Keys a worker holds.
    processing: HashSet<K>,
    /// Failures in a row, per key.
    failures: HashMap<K, u32>,
}

impl<K: Clone + Eq + Hash + Send + std::fmt::Debug + 'static> Queue<K> {
    /// An empty queue.
    pub fn new() -> Arc<Queue<K>> {
        Arc::new(Queue {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
            }),
            ready: Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `key` unless it is queued already.
    pub fn add(&self, key: K) {
        let mut state = self.state();
        if !state.dirty.insert(key.clone()) {
            return;
        }
        if !state.processing.contains(&key) {
            state.waiting.push_back(key);
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Queues `key` after `delay`.
    pub fn add_after(self: &Arc<Self>, key: K, delay: Duration) {
        let queue = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(queue) = queue.upgrade() {
                queue.add(key);
            }
        });
    }

    /// The next key; it is the caller's until [`Queue::done`].
    async fn next(&self) -> K {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.state();
                if let Some(key) = state.waiting.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    if !state.waiting.is_empty() {
                        self.ready.notify_one();
                    }
                    return key;
                }
            }
            notified.await;
        }
    }

    /// The worker is done with `key`; if it was added meanwhile it waits again.
    fn done(&self, key: &K) {
        let mut state = self.state();
        state.processing.remove(key);
        if state.dirty.contains(key) {
            state.waiting.push_back(key.clone());
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Queues `key` again after its next backoff.
    fn retry(self: &Arc<Self>, key: K) {
        let failures = {
            let mut state = self.state();
            let failures = state.failures.entry(key.clone()).or_insert(0);
            *failures = failures.saturating_add(1);
            *failures
        };
        let backoff = BASE_BACKOFF.saturating_mul(1u32 << failures.min(20).saturating_sub(1)).min(MAX_BACKOFF);
        self.add_after(key, backoff);
    }

    /// Forgets `key`'s failures.
    fn forget(&self, key: &K) {
        self.state().failures.remove(key);
    }

    /// Runs `workers` workers over the queue, each calling `work` with one key at a time,
    /// until the returned future is dropped. A failure is logged under `controller` and the
    /// key retried with backoff.
    pub async fn run<F, Fut>(self: &Arc<Self>, controller: &'static str, workers: usize, work: F)
    where
        F: Fn(K) -> Fut,
        Fut: Future<Output = Result<Next, ApiError>>,
    {
        let worker = || async {
            loop {
                let key = self.next().await;
                match work(key.clone()).await {
                    Ok(Next::Done) => self.forget(&key),
                    Ok(Next::After(delay)) => {
                        self.forget(&key);
                        self.add_after(key.clone(), delay);
                    }
                    Err(err) => {
                        tracing::warn!(controller, key = ?key, error = %err.message, "retrying");
                        self.retry(key.clone());
                    }
                }
                self.done(&key);
            }
        };
        futures_util::future::join_all((0..workers).map(|_| worker())).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::{Next, Queue};
    use crate::error::ApiError;

    #[tokio::test]
    async fn a_key_added_while_waiting_is_worked_on_once() {
        let queue = Queue::new();
        for _ in 0..3 {
            queue.add("a");
        }
        queue.add("b");
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let run = queue.run("test", 1, |key| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(key);
                Ok(Next::Done)
            }
        });
        let _ = tokio::time::timeout(Duration::from_millis(100), run).await;
        assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
    }

    #[tokio::test]
    async fn a_key_added_while_worked_on_comes_back_after_and_never_to_two_workers_at_once() {
        let queue = Queue::new();
        queue.add("a");
        let (running, most, calls) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        let run = queue.run("test", 4, |key| {
            let (queue, running, most, calls) = (&queue, &running, &most, &calls);
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    queue.add(key);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(Next::Done)
            }
        });
        let _ = tokio::time::timeout(Duration::from_millis(200), run).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failing_key_is_retried_until_it_succeeds() {
        let queue = Queue::new();
        queue.add("a");
        let calls = AtomicUsize::new(0);
        let run = queue.run("test", 1, |_| {
            let calls = &calls;
            async move {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0..3 => Err(ApiError::internal("not yet")),
                    _ => Ok(Next::Done),
                }
            }
        });
        let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }
}
