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
mod error;
pub mod migrate;
mod progress;
pub mod record;
pub mod retire;
pub mod server_side;
pub mod usage;

pub use api::{CallError, Cluster, Crd, ListPage, Resource};
pub use error::Error;
pub use migrate::{Options, Summary, migrate};
pub use progress::{Progress, Quiet};
