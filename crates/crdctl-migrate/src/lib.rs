//! Storage version migration and version retirement, against any Kubernetes API server
//! (`crdctl serve` or a real cluster) through a kube-rs client.
//!
//! Changing a CRD's storage version does not rewrite the objects already stored: each keeps the
//! version it was written in until something writes it again. The Kubernetes documentation's
//! procedure is to rewrite every object (a no-op update stores it in the current storage
//! version), and only then drop the old version from `status.storedVersions` — after which it
//! may leave `spec.versions`. [`migrate()`] does that; [`retire`] walks the whole retirement
//! of a version (stop serving it, migrate, drop it from `storedVersions`, remove it).
//!
//! How a migration stays correct while other clients write:
//! - every rewrite is a PUT of the object exactly as read, with its `resourceVersion` as the
//!   precondition: a newer write by someone else makes it fail with 409 (it is then re-read and
//!   retried), so nothing written meanwhile is lost or reverted;
//! - `storedVersions` is set only after every object was rewritten, with the CRD's
//!   `resourceVersion` as precondition, and only if the storage version and the stored versions
//!   did not change during the run (a write in another version could have happened);
//! - the list is read in pages; a `continue` token that expired (410) restarts the list, and
//!   objects at or before the last finished key are skipped, as they are after a restart from
//!   the progress [`record`]. Memory holds one page at a time.
//!
//! On a cluster that serves `storagemigration.k8s.io/v1beta1` (`crdctl serve`, or Kubernetes
//! with the storage version migrator on), the rewrite is the server's: [`server_side`] creates a
//! `StorageVersionMigration` and follows it, and the migration goes on to `storedVersions` as
//! above. `Options::client_side` (and `dry_run`) keep the rewrite in this process.
//!
//! Progress goes to a [`Progress`] observer; the CLI draws a bar or logs lines.
//!
//! ```
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use crdctl_server::testing::TestServer;
//!
//! let crd = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/crontab/3-v1-storage.yaml");
//! let server = TestServer::builder().crd_files([crd]).start().await?;
//! let cluster = crdctl_migrate::Cluster::new(kube::Client::try_from(kube::Config::new(server.url().parse()?))?);
//! let options = crdctl_migrate::Options::default();
//! let summary =
//!     crdctl_migrate::migrate(&cluster, "crontabs.example.com", &options, &crdctl_migrate::Quiet).await?;
//! assert_eq!(summary.storage_version, "v1");
//! assert_eq!(summary.stored_versions_after, ["v1"]);
//! # Ok(()) }
//! ```

pub mod api;
pub mod migrate;
pub mod record;
pub mod retire;
pub mod server_side;
pub mod usage;

pub use api::{CallError, Cluster, Resource};
pub use migrate::{Options, Summary, migrate};

use serde_json::Value;

/// A CRD as read from the server: the model's view, with the fields it leaves out.
#[derive(Debug, Clone)]
pub struct Crd {
    /// The definition.
    pub definition: crdctl_model::crd::CustomResourceDefinition,
    /// The object as the server returned it.
    pub raw: Value,
}

impl Crd {
    /// Reads the model's view of a CRD object.
    pub fn from_raw(raw: Value) -> Result<Crd, CallError> {
        let definition = serde_json::from_value(raw.clone())
            .map_err(|err| CallError::Transport(format!("the server returned an unreadable CRD: {err}")))?;
        Ok(Crd { definition, raw })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.definition.metadata.name
    }

    /// `metadata.uid`: a CRD deleted and created again is another one.
    pub fn uid(&self) -> &str {
        self.raw.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
    }

    /// `metadata.resourceVersion`, the precondition of an update.
    pub fn resource_version(&self) -> &str {
        self.raw.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default()
    }

    /// The storage version's name.
    pub fn storage_version(&self) -> Option<&str> {
        self.definition.storage_version().map(|version| version.name.as_str())
    }

    /// `status.storedVersions`.
    pub fn stored_versions(&self) -> &[String] {
        &self.definition.status.stored_versions
    }
}

/// Why a migration or retirement could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{what}: {source}")]
    Call {
        /// What was being done.
        what: String,
        /// The failure.
        source: CallError,
    },
    /// The CRD is not in a state the operation can start from.
    #[error("{0}")]
    Refused(String),
    /// The progress record could not be read or written.
    #[error("progress record {path}: {message}")]
    Record {
        /// The record file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl Error {
    fn call(what: impl Into<String>) -> impl FnOnce(CallError) -> Error {
        let what = what.into();
        move |source| Error::Call { what, source }
    }
}

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
