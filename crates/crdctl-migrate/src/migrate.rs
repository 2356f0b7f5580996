//! `crdctl migrate`: rewrite every object of a CRD in its storage version, then trim
//! `status.storedVersions` to it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};

use crate::api::Crd;
use crate::api::{CallError, Cluster, Resource, crd_path};
use crate::error::Error;
use crate::progress::Progress;
use crate::record::{self, Record};
use crate::server_side::{self, Ended};

/// How many times one object is re-read and rewritten when others keep updating it.
const MAX_ATTEMPTS: usize = 10;
/// How many times the final `storedVersions` update is retried when the CRD changes.
const FINISH_ATTEMPTS: usize = 5;

/// How to run a migration.
#[derive(Debug, Clone)]
pub struct Options {
    /// Objects rewritten at the same time.
    pub concurrency: usize,
    /// Objects per list page.
    pub page_size: u32,
    /// Send every update with `dryRun=All` and change nothing.
    pub dry_run: bool,
    /// Where the progress record is kept (`None`: no record).
    pub record_dir: Option<PathBuf>,
    /// The server's URL, to tell records of different servers apart.
    pub server: String,
    /// Rewrite the objects from this process even where the cluster serves
    /// `StorageVersionMigration`s.
    pub client_side: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            concurrency: 8,
            page_size: 500,
            dry_run: false,
            record_dir: None,
            server: String::new(),
            client_side: false,
        }
    }
}

/// What a migration did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The CRD.
    pub crd: String,
    /// The version every object is now stored in.
    pub storage_version: String,
    /// `status.storedVersions` before.
    pub stored_versions_before: Vec<String>,
    /// `status.storedVersions` after (unchanged unless `finished`).
    pub stored_versions_after: Vec<String>,
    /// Objects written again (they were stored in another version, or in another encoding).
    pub rewritten: u64,
    /// Objects the server found already stored as they would be written (no write happened).
    pub unchanged: u64,
    /// Objects skipped because an earlier run had finished their page.
    pub resumed: u64,
    /// Objects deleted by someone else before they could be rewritten.
    pub gone: u64,
    /// Rewrites retried because someone else updated the object first.
    pub conflicts: u64,
    /// Lists restarted because their `continue` token expired.
    pub restarts: u64,
    /// Objects that could not be rewritten, with the server's answer.
    pub failed: Vec<Failure>,
    /// Whether `storedVersions` now holds only the storage version.
    pub finished: bool,
    /// Why the migration did not finish, when it did not.
    pub incomplete: Option<String>,
    /// Nothing was changed (`--dry-run`).
    pub dry_run: bool,
    /// Where the progress record is, while the migration is unfinished.
    pub record: Option<PathBuf>,
    /// How long it took.
    pub seconds: f64,
    /// The `StorageVersionMigration` the server rewrote the objects with (the server-side
    /// path; the counts above are then the server's to know).
    pub migration: Option<String>,
}

/// An object that could not be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// `namespace/name`, or `name`.
    pub object: String,
    /// The server's answer.
    pub error: String,
}

impl Summary {
    /// Objects handled in this run.
    pub fn handled(&self) -> u64 {
        self.rewritten + self.unchanged + self.gone + self.failed.len() as u64
    }
}

/// The key objects are listed in order of: `namespace/name`, or `name`.
fn list_key(object: &Value) -> String {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    match meta["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    }
}

enum Outcome {
    Rewritten,
    Unchanged,
    Gone,
    Failed(String),
}

impl Summary {
    /// Counts a page's outcomes, by object key.
    fn count(&mut self, outcomes: Vec<(String, Outcome)>) {
        for (key, outcome) in outcomes {
            match outcome {
                Outcome::Rewritten => self.rewritten += 1,
                Outcome::Unchanged => self.unchanged += 1,
                Outcome::Gone => self.gone += 1,
                Outcome::Failed(error) => self.failed.push(Failure { object: key, error }),
            }
        }
    }
}

/// Counters shared by the concurrent rewrites of a page.
#[derive(Default)]
struct Counts {
    conflicts: AtomicU64,
}

/// The record of an earlier run of this migration to resume from (same server, same storage
/// version), else a new one, and where it is kept (`None` without `--record-dir`).
fn resume(
    options: &Options,
    name: &str,
    (crd, storage): (&Crd, &str),
    summary: &mut Summary,
    progress: &dyn Progress,
) -> Result<(Option<PathBuf>, Record), Error> {
    let record_path = options.record_dir.as_ref().map(|dir| record::path(dir, name, crd.uid()));
    let record = match &record_path {
        Some(path) => match record::load(path)? {
            Some(old) if old.server == options.server && old.storage_version == storage => {
                progress.note(&format!(
                    "resuming from {}: {} objects done, up to {}",
                    path.display(),
                    old.done,
                    old.last_key.as_deref().unwrap_or("the start")
                ));
                summary.resumed = old.done;
                old
            }
            _ => Record {
                server: options.server.clone(),
                crd: name.to_string(),
                uid: crd.uid().to_string(),
                storage_version: storage.to_string(),
                ..Record::default()
            },
        },
        None => Record::default(),
    };
    if !options.dry_run {
        summary.record.clone_from(&record_path);
    }
    Ok((record_path, record))
}

/// Migrates every object of the CRD `name` to its storage version and trims
/// `status.storedVersions`.
pub async fn migrate(
    cluster: &Cluster,
    name: &str,
    options: &Options,
    progress: &dyn Progress,
) -> Result<Summary, Error> {
    let started = Instant::now();
    let crd = cluster.crd(name).await.map_err(Error::call(format!("reading CustomResourceDefinition {name}")))?;
    let storage = crd
        .storage_version()
        .ok_or_else(|| Error::Refused(format!("CustomResourceDefinition {name} has no storage version")))?
        .to_string();
    let mut summary = Summary {
        crd: name.to_string(),
        storage_version: storage.clone(),
        stored_versions_before: crd.stored_versions().to_vec(),
        stored_versions_after: crd.stored_versions().to_vec(),
        dry_run: options.dry_run,
        ..Summary::default()
    };
    let on_server = !options.client_side
        && !options.dry_run
        && server_side::served(cluster)
            .await
            .map_err(Error::call("reading discovery of storagemigration.k8s.io/v1beta1"))?;
    if on_server {
        let (migration, ended) = server_side::run(cluster, &crd, progress).await?;
        match ended {
            Ended::Succeeded => finish(cluster, &crd, &storage, &mut summary).await?,
            Ended::Failed(why) => {
                summary.incomplete =
                    Some(format!("StorageVersionMigration {migration} failed: {why}; storedVersions was left as it is"))
            }
        }
        summary.migration = Some(migration);
        summary.seconds = started.elapsed().as_secs_f64();
        return Ok(summary);
    }
    let (record_path, mut record) = resume(options, name, (&crd, &storage), &mut summary, progress)?;

    let resource = Resource::of(&crd, &storage);
    let counts = Counts::default();
    let mut page = list_page(cluster, &resource, options.page_size, None).await?;
    loop {
        let (items, next, remaining) = match page {
            Ok(page) => page,
            Err(CallError::Status { code: 410, .. }) => {
                // The token is older than the server's history: list again from the start,
                // skipping what is done.
                summary.restarts += 1;
                progress.note("the list's continue token expired (410); listing again from the start");
                page = list_page(cluster, &resource, options.page_size, None).await?;
                continue;
            }
            Err(err) => return Err(Error::call(format!("listing {}", resource.collection()))(err)),
        };
        let last_key = items.last().map(list_key);
        let todo: Vec<Value> = items
            .into_iter()
            .filter(|item| record.last_key.as_ref().is_none_or(|done| list_key(item) > *done))
            .collect();
        // Rewrite this page while the next one is read.
        let fetch_next = async {
            match &next {
                Some(token) => Some(list_page(cluster, &resource, options.page_size, Some(token)).await),
                None => None,
            }
        };
        let rewrite_all = futures_util::stream::iter(todo)
            .map(|object| async {
                (list_key(&object), rewrite(cluster, &resource, object, options.dry_run, &counts).await)
            })
            .buffer_unordered(options.concurrency.max(1))
            .collect::<Vec<_>>();
        let (outcomes, following) = tokio::join!(rewrite_all, fetch_next);
        summary.count(outcomes);
        if let Some(last) = last_key
            && record.last_key.as_ref().is_none_or(|done| last > *done)
        {
            record.done = summary.resumed + summary.handled();
            record.last_key = Some(last);
            if let (Some(path), false) = (&record_path, options.dry_run) {
                record::save(path, &record)?;
            }
        }
        progress.advance(summary.resumed + summary.handled(), remaining.map(|rest| record.done + rest));
        match following {
            Some(result) => page = result?,
            None => break,
        }
    }
    summary.conflicts = counts.conflicts.load(Ordering::Relaxed);

    if !summary.failed.is_empty() {
        summary.incomplete =
            Some(format!("{} objects could not be rewritten; storedVersions was left as it is", summary.failed.len()));
    } else if options.dry_run {
        summary.incomplete = Some("dry run: nothing was written".into());
    } else {
        finish(cluster, &crd, &storage, &mut summary).await?;
        if summary.finished
            && let Some(path) = &record_path
        {
            record::remove(path)?;
            summary.record = None;
        }
    }
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(summary)
}

type Page = (Vec<Value>, Option<String>, Option<u64>);

/// One page: the items, the next `continue` token, and `remainingItemCount`. The outer result
/// fails the migration; the inner one is a `Status` the caller may recover from (410).
async fn list_page(
    cluster: &Cluster,
    resource: &Resource,
    limit: u32,
    token: Option<&str>,
) -> Result<Result<Page, CallError>, Error> {
    match cluster.list_page(&resource.collection(), limit, token).await {
        Ok(page) => Ok(Ok((page.items, page.next, page.remaining))),
        Err(err @ CallError::Status { code: 410, .. }) => Ok(Err(err)),
        Err(err) => Err(Error::call(format!("listing {}", resource.collection()))(err)),
    }
}

/// Writes one object back unchanged; on a conflict, reads it again and retries.
async fn rewrite(cluster: &Cluster, resource: &Resource, mut object: Value, dry_run: bool, counts: &Counts) -> Outcome {
    let path = resource.object_path(&object);
    for _ in 0..MAX_ATTEMPTS {
        let before = object.pointer("/metadata/resourceVersion").cloned();
        match cluster.put(&path, &object, dry_run).await {
            Ok(written) if written.pointer("/metadata/resourceVersion") == before.as_ref() => {
                return Outcome::Unchanged;
            }
            Ok(_) => return Outcome::Rewritten,
            Err(CallError::Status { code: 404, .. }) => return Outcome::Gone,
            Err(CallError::Status { code: 409, .. }) => {
                counts.conflicts.fetch_add(1, Ordering::Relaxed);
                object = match cluster.get(&path).await {
                    Ok(current) => current,
                    Err(CallError::Status { code: 404, .. }) => return Outcome::Gone,
                    Err(err) => return Outcome::Failed(err.to_string()),
                };
            }
            Err(err) => return Outcome::Failed(err.to_string()),
        }
    }
    Outcome::Failed(format!("still conflicting after {MAX_ATTEMPTS} attempts"))
}

/// Sets `storedVersions` to the storage version alone, if nothing that matters changed since
/// the migration started.
async fn finish(cluster: &Cluster, started: &Crd, storage: &str, summary: &mut Summary) -> Result<(), Error> {
    let name = started.name();
    for _ in 0..FINISH_ATTEMPTS {
        let current =
            cluster.crd(name).await.map_err(Error::call(format!("reading CustomResourceDefinition {name}")))?;
        summary.stored_versions_after = current.stored_versions().to_vec();
        if current.uid() != started.uid() {
            summary.incomplete = Some(format!("CustomResourceDefinition {name} was deleted and created again"));
            return Ok(());
        }
        let now = current.storage_version().unwrap_or_default();
        if now != storage {
            summary.incomplete = Some(format!(
                "the storage version changed from {storage} to {now} during the migration; run crdctl migrate again"
            ));
            return Ok(());
        }
        // A version added meanwhile was the storage version for a while: objects may be in it.
        if let Some(added) =
            current.stored_versions().iter().find(|v| !started.stored_versions().contains(v) && *v != storage)
        {
            summary.incomplete =
                Some(format!("{added} became a stored version during the migration; run crdctl migrate again"));
            return Ok(());
        }
        if current.stored_versions() == [storage] {
            summary.finished = true;
            return Ok(());
        }
        let patch = json!({
            "metadata": {"resourceVersion": current.resource_version()},
            "status": {"storedVersions": [storage]},
        });
        match cluster.merge_patch(&format!("{}/status", crd_path(name)), &patch).await {
            Ok(updated) => {
                summary.stored_versions_after =
                    Crd::from_raw(updated).map(|crd| crd.stored_versions().to_vec()).unwrap_or_default();
                summary.finished = true;
                return Ok(());
            }
            Err(CallError::Status { code: 409, .. }) => continue,
            Err(err) => {
                return Err(Error::call(format!("updating the status of CustomResourceDefinition {name}"))(err));
            }
        }
    }
    summary.incomplete = Some(format!("CustomResourceDefinition {name} kept changing; run crdctl migrate again"));
    Ok(())
}
