//! Migration and retirement against the real server in-process (`TestServer`), through a real
//! kube-rs client, checking what is stored by reading the store underneath.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crdctl_migrate::retire::{RetireOptions, StepState, retire};
use crdctl_migrate::{Cluster, Options, Progress, Quiet, migrate};
use crdctl_server::testing::TestServer;
use crdctl_storage::{ListOptions, Store};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CRD: &str = "crontabs.example.com";

fn crd() -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"cronSpec": {"type": "string"}, "n": {"type": "integer"}}}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": CRD},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "schema": schema},
                         {"name": "v1", "served": true, "storage": false, "schema": schema}]}})
}

struct Setup {
    server: TestServer,
    store: Arc<dyn Store>,
    client: kube::Client,
    cluster: Cluster,
}

async fn setup(store: Arc<dyn Store>, objects: usize) -> Setup {
    let server = TestServer::start_with(crdctl_server::Config::default(), Arc::clone(&store)).await.unwrap();
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let crds: kube::Api<DynamicObject> = kube::Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    crds.create(&PostParams::default(), &serde_json::from_value(crd()).unwrap()).await.unwrap();
    let api = crontabs(&client, "v1beta1");
    let creates = (0..objects).map(|i| {
        let api = api.clone();
        async move {
            let object = json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab",
                "metadata": {"name": format!("ct-{i:05}")}, "spec": {"cronSpec": "* * * * */5", "n": 0}});
            api.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await.unwrap();
        }
    });
    futures_util::future::join_all(creates).await;
    // The storage version moves to v1; the objects stay stored as v1beta1.
    switch_storage_to_v1(&client).await;
    Setup { server, store, client: client.clone(), cluster: Cluster::new(client) }
}

fn crontabs(client: &kube::Client, version: &str) -> kube::Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", version, "CronTab");
    kube::Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk_with_plural(&gvk, "crontabs"))
}

async fn switch_storage_to_v1(client: &kube::Client) {
    let cluster = Cluster::new(client.clone());
    let mut raw = cluster.crd(CRD).await.unwrap().raw;
    raw["spec"]["versions"][0]["storage"] = json!(false);
    raw["spec"]["versions"][1]["storage"] = json!(true);
    cluster.put(&crdctl_migrate::api::crd_path(CRD), &raw, false).await.unwrap();
}

/// Objects per stored apiVersion, read from the store itself.
async fn stored_versions(store: &dyn Store) -> HashMap<String, u64> {
    let page =
        store.list(ListOptions { prefix: "/registry/example.com/crontabs/", ..Default::default() }).await.unwrap();
    let mut tally = crdctl_server::stats::Tally::default();
    for entry in &page.entries {
        tally.add(&entry.key, &entry.value);
    }
    let stats = tally.finish(page.revision);
    stats.resources.first().map(|r| r.api_versions.clone().into_iter().collect()).unwrap_or_default()
}

fn options(record_dir: Option<&std::path::Path>) -> Options {
    Options {
        page_size: 50,
        concurrency: 8,
        record_dir: record_dir.map(Into::into),
        client_side: true,
        ..Options::default()
    }
}

async fn remove_v1beta1(cluster: &Cluster) -> Result<Value, crdctl_migrate::CallError> {
    let mut raw = cluster.crd(CRD).await.unwrap().raw;
    raw["spec"]["versions"].as_array_mut().unwrap().retain(|v| v["name"] != "v1beta1");
    cluster.put(&crdctl_migrate::api::crd_path(CRD), &raw, false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_is_rewritten_and_concurrent_updates_survive_on_the_client_side() {
    every_object_is_rewritten_and_concurrent_updates_survive(true).await;
}

/// The same through the server's `StorageVersionMigration`, which `migrate` uses where served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_is_rewritten_and_concurrent_updates_survive_on_the_server() {
    every_object_is_rewritten_and_concurrent_updates_survive(false).await;
}

async fn every_object_is_rewritten_and_concurrent_updates_survive(client_side: bool) {
    let options = Options { client_side, ..options(None) };
    let setup = setup(Arc::new(crdctl_storage::memory::open()), 600).await;
    assert_eq!(stored_versions(&*setup.store).await, HashMap::from([("example.com/v1beta1".into(), 600)]));
    let refused = remove_v1beta1(&setup.cluster).await.unwrap_err();
    assert_eq!(refused.code(), Some(422), "v1beta1 is still a stored version");

    // Another client keeps updating objects (at v1beta1) while the migration runs; each
    // acknowledged value must be there afterwards.
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(HashMap::new()));
    let writer = {
        let (api, stop, acknowledged) =
            (crontabs(&setup.client, "v1beta1"), Arc::clone(&stop), Arc::clone(&acknowledged));
        tokio::spawn(async move {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                for i in (round % 7..600).step_by(37) {
                    let name = format!("ct-{i:05}");
                    let patch = Patch::Merge(json!({"spec": {"n": round}}));
                    api.patch(&name, &PatchParams::default(), &patch).await.unwrap();
                    acknowledged.lock().unwrap().insert(name, round);
                }
                round += 1;
            }
        })
    };
    let summary = migrate(&setup.cluster, CRD, &options, &Quiet).await.unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();

    assert!(summary.finished, "{summary:?}");
    assert_eq!(summary.stored_versions_before, ["v1beta1", "v1"]);
    assert_eq!(summary.stored_versions_after, ["v1"]);
    if client_side {
        assert_eq!((summary.rewritten + summary.unchanged, summary.migration.as_deref()), (600, None), "{summary:?}");
    } else {
        assert!(
            summary.migration.as_ref().is_some_and(|name| name.starts_with("crontabs.example.com-")),
            "{summary:?}"
        );
    }
    assert!(summary.failed.is_empty());
    assert_eq!(stored_versions(&*setup.store).await, HashMap::from([("example.com/v1".into(), 600)]));
    let api = crontabs(&setup.client, "v1");
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() > 10, "the other client wrote during the migration");
    for (name, round) in &acknowledged {
        assert_eq!(api.get(name).await.unwrap().data["spec"]["n"], *round, "{name} lost an update");
    }
    assert_eq!(setup.cluster.crd(CRD).await.unwrap().stored_versions(), ["v1"]);
    remove_v1beta1(&setup.cluster).await.unwrap();

    // Run again: nothing is left to rewrite.
    let again = migrate(&setup.cluster, CRD, &options, &Quiet).await.unwrap();
    assert!(again.finished, "{again:?}");
    if client_side {
        assert_eq!((again.rewritten, again.unchanged), (0, 600));
    }
    drop(setup.server);
}

/// Writes unrelated keys after each page, so the list's revision falls out of the history.
struct Compactor {
    store: Arc<dyn Store>,
    runtime: tokio::runtime::Handle,
    restarted: AtomicBool,
    written: std::sync::atomic::AtomicUsize,
}

impl Progress for Compactor {
    fn advance(&self, _done: u64, _total: Option<u64>) {
        if self.restarted.load(Ordering::Relaxed) {
            return;
        }
        tokio::task::block_in_place(|| {
            self.runtime.block_on(async {
                for _ in 0..60 {
                    let n = self.written.fetch_add(1, Ordering::Relaxed);
                    self.store.create(&format!("/unrelated/{n}"), vec![]).await.unwrap();
                }
            })
        });
    }

    fn note(&self, message: &str) {
        if message.contains("410") {
            self.restarted.store(true, Ordering::Relaxed);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_continue_token_restarts_the_list_and_skips_finished_pages() {
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::memory::open_with_window(50));
    let setup = setup(Arc::clone(&store), 400).await;
    let compactor = Compactor {
        store,
        runtime: tokio::runtime::Handle::current(),
        restarted: AtomicBool::new(false),
        written: Default::default(),
    };
    let summary = migrate(&setup.cluster, CRD, &options(None), &compactor).await.unwrap();
    assert!(summary.restarts >= 1, "{summary:?}");
    assert!(summary.finished);
    assert_eq!(summary.rewritten + summary.unchanged, 400, "finished pages are not rewritten after the restart");
    assert_eq!(stored_versions(&*setup.store).await, HashMap::from([("example.com/v1".into(), 400)]));
}

/// Stops the migration after a number of pages, as a kill would.
struct StopAfter {
    pages: std::sync::atomic::AtomicUsize,
    stop: tokio::sync::Notify,
}

impl Progress for StopAfter {
    fn advance(&self, _done: u64, _total: Option<u64>) {
        if self.pages.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.stop.notify_one();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_sends_every_update_and_changes_nothing() {
    let setup = setup(Arc::new(crdctl_storage::memory::open()), 120).await;
    let before = setup.store.revision().await.unwrap();
    let options = Options { dry_run: true, ..options(None) };
    let summary = migrate(&setup.cluster, CRD, &options, &Quiet).await.unwrap();
    assert!(summary.dry_run && !summary.finished && summary.failed.is_empty(), "{summary:?}");
    assert_eq!(summary.rewritten + summary.unchanged, 120);
    assert_eq!(setup.store.revision().await.unwrap(), before, "nothing was written");
    assert_eq!(stored_versions(&*setup.store).await, HashMap::from([("example.com/v1beta1".into(), 120)]));
    assert_eq!(setup.cluster.crd(CRD).await.unwrap().stored_versions(), ["v1beta1", "v1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_migration_resumes_from_its_record() {
    let setup = setup(Arc::new(crdctl_storage::memory::open()), 500).await;
    let records = tempfile::tempdir().unwrap();
    let observer = Arc::new(StopAfter { pages: 3.into(), stop: tokio::sync::Notify::new() });
    let first = {
        let (cluster, observer, options) =
            (setup.cluster.clone(), Arc::clone(&observer), options(Some(records.path())));
        tokio::spawn(async move { migrate(&cluster, CRD, &options, &*observer).await })
    };
    observer.stop.notified().await;
    first.abort();
    let _ = first.await;
    let record_file = std::fs::read_dir(records.path()).unwrap().next().unwrap().unwrap().path();
    let record: crdctl_migrate::record::Record = crdctl_migrate::record::load(&record_file).unwrap().unwrap();
    assert!(record.done >= 150, "{record:?}");

    let summary = migrate(&setup.cluster, CRD, &options(Some(records.path())), &Quiet).await.unwrap();
    assert!(summary.finished);
    assert_eq!(summary.resumed, record.done);
    assert_eq!(summary.handled(), 500 - record.done, "no finished page is rewritten again");
    assert!(!record_file.exists(), "the record of a finished migration is removed");
    assert_eq!(stored_versions(&*setup.store).await, HashMap::from([("example.com/v1".into(), 500)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retire_version_walks_the_documented_procedure_and_refuses_with_reasons() {
    let setup = setup(Arc::new(crdctl_storage::memory::open()), 120).await;
    let check_only = RetireOptions { apply: false, unused_for: Duration::from_secs(600), migrate: options(None) };

    // v1 is the storage version: refused.
    let storage = retire(&setup.cluster, CRD, "v1", &check_only, &Quiet).await.unwrap();
    assert!(storage.refused());
    assert!(storage.checks.iter().any(|c| !c.ok && c.detail.contains("v1 is the storage version")), "{storage:?}");

    // v1beta1 was just used (the objects were created through it): refused, with when.
    let used = retire(&setup.cluster, CRD, "v1beta1", &RetireOptions { apply: true, ..check_only.clone() }, &Quiet)
        .await
        .unwrap();
    assert!(used.refused());
    let usage = used.checks.iter().find(|c| !c.ok).unwrap();
    assert!(usage.detail.starts_with("clients requested v1beta1 ") && usage.detail.contains(" ago "), "{usage:?}");
    assert!(used.steps.iter().all(|s| s.state == StepState::Blocked), "nothing was changed: {used:?}");
    assert_eq!(setup.cluster.crd(CRD).await.unwrap().definition.spec.versions.len(), 2);

    // Without the usage window, the plan is every step pending; --apply carries it out.
    let quiet = RetireOptions { unused_for: Duration::ZERO, ..check_only.clone() };
    let plan = retire(&setup.cluster, CRD, "v1beta1", &quiet, &Quiet).await.unwrap();
    assert!(!plan.refused());
    assert!(plan.steps.iter().all(|s| s.state == StepState::Pending), "{plan:?}");
    let applied =
        retire(&setup.cluster, CRD, "v1beta1", &RetireOptions { apply: true, ..quiet.clone() }, &Quiet).await.unwrap();
    assert!(applied.retired(), "{applied:?}");
    assert!(applied.steps.iter().all(|s| s.state == StepState::Applied));
    assert_eq!(applied.migration.as_ref().unwrap().rewritten, 120);
    let crd = setup.cluster.crd(CRD).await.unwrap();
    assert_eq!(crd.definition.spec.versions.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["v1"]);
    assert_eq!(crd.stored_versions(), ["v1"]);
    assert_eq!(stored_versions(&*setup.store).await, HashMap::from([("example.com/v1".into(), 120)]));

    // Idempotent: again, everything is done and nothing changes.
    let again = retire(&setup.cluster, CRD, "v1beta1", &RetireOptions { apply: true, ..quiet }, &Quiet).await.unwrap();
    assert!(again.retired() && again.steps.iter().all(|s| s.state == StepState::Done));
    assert_eq!(setup.cluster.crd(CRD).await.unwrap().resource_version(), crd.resource_version());
}
