//! The part of kube-controller-manager that acts on API objects alone (nothing here runs Pods),
//! as one small framework and the controllers written on it.
//!
//! The framework is client-go's: an [`informer`] follows the store's own change feed (a list,
//! then a watch; listed again after a break, so nothing is missed while it was down), a
//! [`queue`] hands each key to one worker at a time and retries failures with backoff, and
//! [`Client`] writes as a request would — through the verbs, so admission, validation,
//! finalizers and the lifecycles apply to a controller's writes as to a user's, each a
//! patch or delete with preconditions, re-read and retried on a conflict.
//!
//! The controllers: [`gc`] (the garbage collector: `ownerReferences`, background, foreground
//! and orphan deletion), [`namespace`] (a deleted namespace empties itself, reports what is
//! left, and goes), [`defaults`] (every namespace's `default` ServiceAccount and
//! `kube-root-ca.crt`), [`migrator`] (the storage version migrator), [`aggregation`] (an
//! aggregated ClusterRole's rules written), and apiextensions' own
//! [`crd_cleanup`] (a deleted CRD's objects go, finalizers honoured, before the CRD). One replica at a
//! time runs them: on a store other processes share (etcd), the replica holding the
//! `kube-system/crdctl-controller-manager` Lease ([`lease`]), as one kube-controller-manager
//! leads; an embedded store belongs to one server, which runs them from the start.

pub mod aggregation;
pub mod crd_cleanup;
pub mod defaults;
pub mod gc;
pub mod lease;
pub mod migrator;
pub mod namespace;
pub mod queue;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::StatusCode;
use crdctl_storage::Store;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::informer;
use crate::metrics::Metrics;
use crate::negotiate::BodyType;
use crate::object::NameGenerator;
use crate::registry::{Propagation, Registry};
use crate::rest::{self, Endpoint, Params};

/// The Lease the controllers' leader holds.
pub const LEASE: &str = "crdctl-controller-manager";

/// The user agent controllers write with (its first segment names them in `managedFields`).
const USER_AGENT: &str = "kube-controller-manager/v1.33.0 (linux/amd64) kubernetes/crdctl";

/// Which controllers run; all by default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controllers {
    /// The garbage collector.
    pub garbage_collector: bool,
    /// The namespace controller: a deleted namespace empties itself and goes.
    pub namespace: bool,
    /// The service account controller: every namespace's `default` ServiceAccount.
    pub service_account: bool,
    /// The root CA publisher: every namespace's `kube-root-ca.crt` ConfigMap.
    pub root_ca_publisher: bool,
    /// The storage version migrator.
    pub storage_version_migrator: bool,
    /// The ClusterRole aggregation controller: an aggregated ClusterRole's `rules` written.
    pub cluster_role_aggregation: bool,
}

impl Default for Controllers {
    fn default() -> Controllers {
        Controllers {
            garbage_collector: true,
            namespace: true,
            service_account: true,
            root_ca_publisher: true,
            storage_version_migrator: true,
            cluster_role_aggregation: true,
        }
    }
}

impl Controllers {
    /// The controllers' names, as kube-controller-manager's `--controllers` spells them.
    pub const NAMES: [&'static str; 6] = [
        "garbage-collector-controller",
        "namespace-controller",
        "serviceaccount-controller",
        "root-ca-certificate-publisher-controller",
        "storage-version-migrator-controller",
        "clusterrole-aggregation-controller",
    ];

    /// kube-controller-manager's `--controllers`: a comma-separated list of names to run,
    /// `*` for all (the default), `-name` for all but that one.
    pub fn parse(list: &str) -> Result<Controllers, String> {
        let none = Controllers {
            garbage_collector: false,
            namespace: false,
            service_account: false,
            root_ca_publisher: false,
            storage_version_migrator: false,
            cluster_role_aggregation: false,
        };
        let mut controllers = none.clone();
        for item in list.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let (name, on) = match item.strip_prefix('-') {
                Some(name) => (name, false),
                None => (item, true),
            };
            if name == "*" {
                controllers = if on { Controllers::default() } else { none.clone() };
                continue;
            }
            let switch = match name {
                "garbage-collector-controller" => &mut controllers.garbage_collector,
                "namespace-controller" => &mut controllers.namespace,
                "serviceaccount-controller" => &mut controllers.service_account,
                "root-ca-certificate-publisher-controller" => &mut controllers.root_ca_publisher,
                "storage-version-migrator-controller" => &mut controllers.storage_version_migrator,
                "clusterrole-aggregation-controller" => &mut controllers.cluster_role_aggregation,
                _ => return Err(format!("{name:?} is not a controller: known are {}", Controllers::NAMES.join(", "))),
            };
            *switch = on;
        }
        Ok(controllers)
    }
}

/// What controllers reach the server by: its verbs, as a request does.
pub trait Api: Send + Sync + 'static {
    /// The verbs' context.
    fn verbs(&self) -> rest::Context<'_>;
}

/// What the controllers use of the server, owned: they run as long as it does.
#[derive(Clone)]
pub struct Context {
    /// The server's verbs.
    pub api: Arc<dyn Api>,
    /// The store, for following its changes and reading.
    pub store: Arc<dyn Store>,
    /// The served CRDs.
    pub registry: Registry,
    /// Where migrations and leadership are counted.
    pub metrics: Metrics,
    /// Set on shutdown: the controllers stop.
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,
    /// How names are drawn for what controllers create.
    pub names: NameGenerator,
    /// Which controllers run.
    pub controllers: Controllers,
    /// How replicas on a shared store elect the one that runs them.
    pub leader_election: lease::Timings,
    /// Create a `StorageVersionMigration` whenever a CRD's storage version changes.
    pub auto_migrate: bool,
    /// The server's CA (PEM), published in every namespace; empty without TLS.
    pub root_ca: String,
}

impl Context {
    /// A client writing through the verbs.
    pub fn client(&self) -> Client<'_> {
        Client { cx: self.api.verbs(), registry: &self.registry }
    }
}

/// Runs the controllers until the server shuts down: at once on an embedded store, else
/// whenever this replica holds the Lease; then gives the Lease up.
pub async fn run(cx: Context) {
    let mut stop = cx.shutdown.subscribe();
    if !cx.store.shared() {
        cx.metrics.set_leading(LEASE, true);
        tokio::select! {
            _ = lead(&cx) => {}
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
        return;
    }
    let elector = lease::Elector::new(Arc::clone(&cx.store), LEASE, cx.leader_election.clone());
    while elector.acquire(&mut stop).await {
        tracing::info!(identity = elector.identity(), "leading the controllers");
        cx.metrics.set_leading(LEASE, true);
        tokio::select! {
            _ = lead(&cx) => {}
            _ = elector.keep() => tracing::warn!(identity = elector.identity(), "lost the controllers' lease"),
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
        cx.metrics.set_leading(LEASE, false);
    }
    elector.release().await;
}

/// A handler for [`informer::follow`] that queues the name of each object being deleted: what
/// a controller that finishes deletions (namespaces, CRDs) works on.
pub fn queue_deleted(queue: &queue::Queue<String>) -> impl FnMut(informer::Change) + '_ {
    |change| {
        if let informer::Change::Put { object, .. } = change
            && crate::object::meta_field(&object, "deletionTimestamp").is_some()
        {
            queue.add(crate::object::name(&object).to_string());
        }
    }
}

/// Every controller that is switched on, together.
async fn lead(cx: &Context) {
    // The CRD finalizer is the API server's own (apiextensions'), never switched off.
    let mut running: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = vec![Box::pin(crd_cleanup::run(cx))];
    if cx.controllers.garbage_collector {
        running.push(Box::pin(gc::run(cx)));
    }
    if cx.controllers.namespace {
        running.push(Box::pin(namespace::run(cx)));
    }
    if cx.controllers.service_account {
        running.push(Box::pin(defaults::run(cx, defaults::service_account())));
    }
    if cx.controllers.root_ca_publisher {
        running.push(Box::pin(defaults::run(cx, defaults::root_ca(&cx.root_ca))));
    }
    if cx.controllers.storage_version_migrator {
        running.push(Box::pin(migrator::run(cx)));
    }
    if cx.controllers.cluster_role_aggregation {
        running.push(Box::pin(aggregation::run(cx)));
    }
    futures_util::future::join_all(running).await;
}

/// Writes as a request would, through the verbs.
pub struct Client<'a> {
    cx: rest::Context<'a>,
    registry: &'a Registry,
}

impl Client<'_> {
    /// The endpoint of objects of `api_version` and `kind` in `namespace`: a built-in resource,
    /// or a CRD's (at that version if it is served, else at its storage version).
    pub fn endpoint(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Option<Endpoint> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let namespace = namespace.map(str::to_string);
        let built_in = crate::registry::builtin::RESOURCES.iter();
        if let Some(row) = built_in.into_iter().find(|r| r.group == group && r.version == version && r.kind == kind) {
            return Some(Endpoint::built_in(row, namespace));
        }
        let crds = self.registry.all();
        let crd = crds.values().find(|crd| crd.group() == group && crd.kind() == kind)?;
        let version = if crd.served_version(version).is_some() { version } else { crd.storage_version() };
        let version = version.to_string();
        Some(Endpoint::custom(Arc::clone(crd), &version, namespace))
    }

    fn params() -> Params {
        Params { user_agent: Some(USER_AGENT.into()), ..Params::default() }
    }

    /// Deletes object `name` if it is still the one with `uid`, with `propagation`; an object
    /// already gone, or replaced by another of that name, is not an error.
    pub async fn delete(&self, endpoint: &Endpoint, name: &str, uid: &str, propagation: Propagation) -> ApiResult<()> {
        let sent = json!({"propagationPolicy": propagation.name(), "preconditions": {"uid": uid}});
        let options = rest::DeleteOptions { sent: Some(sent), ..Default::default() };
        match rest::delete(self.cx, endpoint, name, &options).await {
            Err(err) if err.code == StatusCode::NOT_FOUND || err.code == StatusCode::CONFLICT => Ok(()),
            done => done.map(|_| ()),
        }
    }

    /// Changes the metadata of `object` if it has not changed since it was read: a merge patch
    /// with its `resourceVersion` as precondition (a revision is the store's, so it names that
    /// one write of that one object). Whether it was written (false: it is gone, or changed;
    /// read it again).
    pub async fn patch_metadata(&self, endpoint: &Endpoint, object: &Value, metadata: Value) -> ApiResult<bool> {
        let name = crate::object::name(object);
        let mut patch = json!({"metadata": metadata});
        let read_at = crate::object::meta_field(object, "resourceVersion").cloned().unwrap_or(Value::Null);
        crate::object::meta_mut(&mut patch).insert("resourceVersion".into(), read_at);
        let change = rest::Change::Patch(BodyType::MergePatch, patch);
        match rest::update(self.cx, endpoint, name, change, rest::Subresource::Main, &Self::params()).await {
            Ok(_) => Ok(true),
            Err(err) if err.code == StatusCode::NOT_FOUND || err.code == StatusCode::CONFLICT => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Replaces object `name` with `object`, which carries the `resourceVersion` it was read at;
    /// whether it was written (false: it is gone, or changed; read it again).
    pub async fn replace(&self, endpoint: &Endpoint, name: &str, object: Value) -> ApiResult<bool> {
        let change = rest::Change::Replace(object);
        match rest::update(self.cx, endpoint, name, change, rest::Subresource::Main, &Self::params()).await {
            Ok(_) => Ok(true),
            Err(err) if err.code == StatusCode::NOT_FOUND || err.code == StatusCode::CONFLICT => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Creates `object` at `endpoint`.
    pub async fn create(&self, endpoint: &Endpoint, object: Value) -> ApiResult<()> {
        rest::create(self.cx, endpoint, object, &Self::params(), rest::Managed::Record).await.map(|_| ())
    }

    /// Reads object `name` as stored; `None` if there is none.
    pub async fn get(&self, endpoint: &Endpoint, name: &str) -> ApiResult<Option<Value>> {
        let entry =
            self.cx.store.get(&endpoint.key(name)).await.map_err(|err| ApiError::unavailable(err.to_string()))?;
        entry.map(|entry| crate::object::decode_entry(&entry)).transpose()
    }
}

/// upstream's `GuaranteedUpdate` for a controller's own writes: reads the object under `key`,
/// lets `change` change it, and writes it back comparing revisions, reading again on a
/// conflict. Nothing is written when `change` leaves it as it was, or it is gone; the entry
/// written, if any.
pub async fn guaranteed_update(
    store: &dyn Store,
    key: &str,
    mut change: impl FnMut(&mut Value),
) -> Result<Option<crdctl_storage::Entry>, crdctl_storage::StoreError> {
    loop {
        let Some(entry) = store.get(key).await? else { return Ok(None) };
        let Some(mut object) = crate::object::decode(&entry.value, entry.mod_revision) else { return Ok(None) };
        let before = object.clone();
        change(&mut object);
        if object == before {
            return Ok(None);
        }
        match store.update(key, crate::object::to_stored(&object), entry.mod_revision).await {
            Ok(written) => return Ok(Some(written)),
            Err(crdctl_storage::StoreError::Conflict { .. }) => continue,
            Err(crdctl_storage::StoreError::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Controllers;

    #[test]
    fn controllers_are_named_as_kube_controller_manager_names_them() {
        assert_eq!(Controllers::parse("*"), Ok(Controllers::default()));
        let without_gc = Controllers::parse("*,-garbage-collector-controller").unwrap();
        assert_eq!(without_gc, Controllers { garbage_collector: false, ..Controllers::default() });
        let only = Controllers::parse("namespace-controller").unwrap();
        assert!(only.namespace && !only.garbage_collector && !only.storage_version_migrator);
        let error = Controllers::parse("*,-gc").unwrap_err();
        assert!(error.starts_with("\"gc\" is not a controller: known are garbage-collector-controller, "), "{error}");
    }
}
