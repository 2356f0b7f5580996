//! The server-side path: on a cluster that serves `storagemigration.k8s.io/v1beta1`, a
//! `StorageVersionMigration` asks the cluster's own migrator (kube-controller-manager's, or
//! `crdctl serve`'s) to rewrite the objects, with no request per object; this module creates one
//! for the CRD's resource and follows it to `Succeeded` or `Failed`. Upstream's migrator does not
//! trim `status.storedVersions`: [`crate::migrate()`] does that afterwards, as on the client path.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::Crd;
use crate::api::{CallError, Cluster};
use crate::error::Error;
use crate::progress::Progress;

/// The API group version served for migrations.
const GROUP_VERSION: &str = "/apis/storagemigration.k8s.io/v1beta1";
/// How soon a migration's status is read again: at first, then doubling up to the most, so a
/// short migration is seen ending at once and a long one costs the cluster four reads a second.
const POLL_FIRST: Duration = Duration::from_millis(20);
const POLL_AT_MOST: Duration = Duration::from_millis(250);
/// How long a migration may go without any status before the cluster is taken to have no
/// migrator running (the controller is off by default in kube-controller-manager).
const UNCLAIMED_FOR: Duration = Duration::from_secs(60);

/// Whether the cluster serves `StorageVersionMigration`s.
pub async fn served(cluster: &Cluster) -> Result<bool, CallError> {
    match cluster.get(GROUP_VERSION).await {
        Ok(list) => Ok(list.get("resources").and_then(Value::as_array).is_some_and(|resources| {
            resources.iter().any(|r| r.get("name") == Some(&json!("storageversionmigrations")))
        })),
        Err(CallError::Status { code: 404, .. }) => Ok(false),
        Err(err) => Err(err),
    }
}

/// How a server-side migration ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Every object is stored in the storage version.
    Succeeded,
    /// The migrator gave up: `reason: message`.
    Failed(String),
}

/// Creates a migration of `crd`'s resource and waits for it to end; returns its name and end.
pub async fn run(cluster: &Cluster, crd: &Crd, progress: &dyn Progress) -> Result<(String, Ended), Error> {
    let spec = &crd.definition.spec;
    let migration = json!({
        "apiVersion": "storagemigration.k8s.io/v1beta1",
        "kind": "StorageVersionMigration",
        "metadata": {"generateName": format!("{}-", crd.name())},
        "spec": {"resource": {"group": spec.group, "resource": spec.names.plural}},
    });
    let collection = format!("{GROUP_VERSION}/storageversionmigrations");
    let created = cluster
        .post(&collection, &migration)
        .await
        .map_err(Error::call(format!("creating a StorageVersionMigration for {}", crd.name())))?;
    let name = created.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    progress.note(&format!("StorageVersionMigration {name} created; the server rewrites the objects"));
    let started = Instant::now();
    let mut running = false;
    let mut wait = POLL_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(POLL_AT_MOST);
        let current = cluster
            .get(&format!("{collection}/{name}"))
            .await
            .map_err(Error::call(format!("reading StorageVersionMigration {name}")))?;
        if let Some(failed) = condition(&current, "Failed") {
            return Ok((name, Ended::Failed(failed)));
        }
        if condition(&current, "Succeeded").is_some() {
            return Ok((name, Ended::Succeeded));
        }
        if !running && condition(&current, "Running").is_some() {
            running = true;
            progress.note(&format!("StorageVersionMigration {name} is running"));
        }
        if current.get("status").is_none_or(|status| status.as_object().is_none_or(|s| s.is_empty()))
            && started.elapsed() > UNCLAIMED_FOR
        {
            return Err(Error::Refused(format!(
                "StorageVersionMigration {name} was not taken up within {} s: the cluster runs no storage version migrator; run crdctl migrate --client-side",
                UNCLAIMED_FOR.as_secs()
            )));
        }
    }
}

/// `reason: message` of a condition that is `True`.
fn condition(migration: &Value, kind: &str) -> Option<String> {
    let conditions = migration.pointer("/status/conditions")?.as_array()?;
    let text = |c: &Value, field: &str| c.get(field).and_then(Value::as_str).unwrap_or_default().to_string();
    let found = conditions.iter().find(|c| text(c, "type") == kind && text(c, "status") == "True")?;
    let reason = text(found, "reason");
    Some(match found.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        Some(message) => format!("{reason}: {message}"),
        None => reason.to_string(),
    })
}
