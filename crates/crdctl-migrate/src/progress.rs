//! How a running migration is observed.

/// Observes a migration as it runs; the methods have no-op defaults.
pub trait Progress: Send + Sync {
    /// A page was finished: `done` objects so far, of about `total` (when the server says).
    fn advance(&self, done: u64, total: Option<u64>) {
        let _ = (done, total);
    }
    /// Something worth telling a person (a restart, a retry, where the record is).
    fn note(&self, message: &str) {
        let _ = message;
    }
}

/// A [`Progress`] that shows nothing.
pub struct Quiet;

impl Progress for Quiet {}
