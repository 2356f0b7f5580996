//! `StorageVersionMigration` as an API the server carries out: served with upstream's validation,
//! run to `Succeeded` with every object rewritten in the storage version (on each backend),
//! resumed after a restart, triggered by a storage version change under `auto_migrate`, run by
//! one replica of two, and reflected in discovery's `storageVersionHash`.

// Test code throughout, as clippy's allowances for tests (clippy.toml) see it.
#![cfg(test)]

use std::sync::Arc;
use std::time::{Duration, Instant};

mod backends;
mod http;

use backends::Backend;
use crdctl_server::Config;
use crdctl_server::testing::TestServer;
use crdctl_storage::{ListOptions, Store};
use http::Http;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const MIGRATIONS: &str = "/apis/storagemigration.k8s.io/v1beta1/storageversionmigrations";
const CRONTABS: &str = "/apis/example.com/v1beta1/namespaces/default/crontabs";

/// CronTabs in v1beta1 and v1 (None conversion), `storage` the storage version.
fn crd(storage: &str) -> Value {
    let version = |name: &str| {
        json!({"name": name, "served": true, "storage": name == storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"cronSpec": {"type": "string"}}}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [version("v1beta1"), version("v1")]}})
}

fn migration(name: &str, group: &str, resource: &str) -> Value {
    json!({"apiVersion": "storagemigration.k8s.io/v1beta1", "kind": "StorageVersionMigration",
        "metadata": {"name": name}, "spec": {"resource": {"group": group, "resource": resource}}})
}

struct Client {
    http: Http,
}

impl Client {
    fn of(server: &TestServer) -> Client {
        Client { http: Http::to(server) }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.http.send(method.as_str(), path, "application/json", body).await
    }

    async fn get(&self, path: &str) -> Value {
        let (code, body) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(code, 200, "{path}: {body}");
        body
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn metrics(&self) -> String {
        let metrics = self.http.client.get(format!("{}/metrics", self.http.url)).send().await.unwrap();
        metrics.text().await.unwrap()
    }

    /// CronTabs at v1beta1 (its storage version), then v1 made the storage version.
    async fn crontabs_stored_in_v1beta1(&self, count: usize) {
        assert_eq!(self.post(CRDS, &crd("v1beta1")).await.0, 201);
        self.wait_served(CRONTABS).await;
        for n in 0..count {
            let object = json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab",
                "metadata": {"name": format!("c{n}")}, "spec": {"cronSpec": "* * * * */5"}});
            let (code, body) = self.post(CRONTABS, &object).await;
            assert_eq!(code, 201, "{body}");
        }
        self.store_in_v1().await;
    }

    async fn store_in_v1(&self) {
        let mut current = self.get(&format!("{CRDS}/crontabs.example.com")).await;
        current["spec"]["versions"] = crd("v1")["spec"]["versions"].clone();
        let (code, body) =
            self.send(reqwest::Method::PUT, &format!("{CRDS}/crontabs.example.com"), Some(&current)).await;
        assert_eq!(code, 200, "{body}");
    }

    async fn wait_served(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.send(reqwest::Method::GET, path, None).await.0 != 200 {
            assert!(Instant::now() < deadline, "{path} is not served");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the migration `name` has a final condition; returns it.
    async fn finished(&self, name: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let migration = self.get(&format!("{MIGRATIONS}/{name}")).await;
            let conditions = migration.pointer("/status/conditions").and_then(Value::as_array).cloned();
            let done = conditions
                .unwrap_or_default()
                .iter()
                .any(|c| (c["type"] == "Succeeded" || c["type"] == "Failed") && c["status"] == "True");
            if done {
                return migration;
            }
            assert!(Instant::now() < deadline, "{name} did not finish: {migration}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The condition `kind` of a migration: (status, reason, message).
fn condition(migration: &Value, kind: &str) -> (String, String, String) {
    let conditions = migration["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let found = conditions.into_iter().find(|c| c["type"] == kind).unwrap_or_default();
    let text = |field: &str| found[field].as_str().unwrap_or_default().to_string();
    (text("status"), text("reason"), text("message"))
}

/// The `apiVersion` every stored CronTab has, as the store holds it.
async fn stored_versions(store: &dyn Store) -> Vec<String> {
    let page =
        store.list(ListOptions { prefix: "/registry/example.com/crontabs/", ..Default::default() }).await.unwrap();
    page.entries
        .iter()
        .map(|e| serde_json::from_slice::<Value>(&e.value).unwrap()["apiVersion"].as_str().unwrap().to_string())
        .collect()
}

async fn migrates_every_object_to_the_storage_version(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let api = Client::of(&server);
    api.crontabs_stored_in_v1beta1(120).await;
    let store = Arc::clone(&server.server().state().store);
    assert!(stored_versions(&*store).await.iter().all(|v| v == "example.com/v1beta1"));
    let before = api.get(CRONTABS).await;

    let (code, created) = api.post(MIGRATIONS, &migration("crontabs", "example.com", "crontabs")).await;
    assert_eq!(code, 201, "{created}");
    let done = api.finished("crontabs").await;
    assert_eq!(
        condition(&done, "Succeeded"),
        ("True".into(), "StorageVersionMigrationSucceeded".into(), String::new()),
        "{done}"
    );
    assert_eq!(
        condition(&done, "Running"),
        ("False".into(), "StorageVersionMigrationInProgress".into(), String::new())
    );
    let recorded: u64 = done["status"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(recorded > 0);
    let stored = stored_versions(&*store).await;
    assert_eq!(stored.len(), 120);
    assert!(stored.iter().all(|v| v == "example.com/v1"), "{stored:?}");
    // Rewritten, not changed: same objects, same generation, new resourceVersions.
    let after = api.get(CRONTABS).await;
    for (old, new) in before["items"].as_array().unwrap().iter().zip(after["items"].as_array().unwrap()) {
        assert_eq!(old["spec"], new["spec"]);
        assert_eq!(old["metadata"]["uid"], new["metadata"]["uid"]);
        assert_eq!(old["metadata"]["generation"], new["metadata"]["generation"]);
        assert_ne!(old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"]);
    }
    assert!(api.metrics().await.contains(
        r#"crdctl_storage_version_migrated_objects_total{resource="crontabs.example.com",result="succeeded"} 120"#
    ));
    // A second migration finds nothing to rewrite.
    api.post(MIGRATIONS, &migration("again", "example.com", "crontabs")).await;
    assert_eq!(condition(&api.finished("again").await, "Succeeded").0, "True");
    assert!(api.metrics().await.contains(
        r#"crdctl_storage_version_migrated_objects_total{resource="crontabs.example.com",result="succeeded"} 120"#
    ));
}

async fn migrations_are_validated_and_fail_as_upstream(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let api = Client::of(&server);
    let (code, refused) = api.post(MIGRATIONS, &migration("empty", "example.com", "")).await;
    assert_eq!(
        (code, refused["message"].as_str().unwrap_or_default()),
        (
            422,
            r#"StorageVersionMigration.storagemigration.k8s.io "empty" is invalid: spec.resource.resource: Required value: resource is required"#
        )
    );

    let (code, _) = api.post(MIGRATIONS, &migration("nothing", "example.com", "widgets")).await;
    assert_eq!(code, 201);
    let failed = api.finished("nothing").await;
    assert_eq!(
        condition(&failed, "Failed"),
        ("True".into(), "StorageVersionMigrationFailed".into(), "resource does not exist in discovery".into())
    );
    // A built-in resource is stored in its one version: nothing to rewrite.
    api.post(MIGRATIONS, &migration("configmaps", "", "configmaps")).await;
    assert_eq!(condition(&api.finished("configmaps").await, "Succeeded").0, "True");

    // spec.resource is immutable; status.resourceVersion is set once.
    let path = format!("{MIGRATIONS}/configmaps");
    let mut changed = api.get(&path).await;
    changed["spec"]["resource"]["resource"] = json!("secrets");
    let (code, refused) = api.send(reqwest::Method::PUT, &path, Some(&changed)).await;
    assert_eq!(
        (code, refused["message"].as_str().unwrap_or_default()),
        (
            422,
            r#"StorageVersionMigration.storagemigration.k8s.io "configmaps" is invalid: resource: Invalid value: "secrets": field is immutable"#
        )
    );
    let mut moved = api.get(&path).await;
    moved["status"]["resourceVersion"] = json!("1");
    let (code, refused) = api.send(reqwest::Method::PUT, &format!("{path}/status"), Some(&moved)).await;
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"].as_str().unwrap_or_default().ends_with("resourceVersion cannot be updated"),
        "{refused}"
    );
}

/// v1alpha1 (what 1.30–1.34 serve) is the same resource, stored as v1beta1.
async fn v1alpha1_is_served_and_stored_as_v1beta1(backend: Backend) {
    let (server, _keep) = backend.start().await;
    let api = Client::of(&server);
    api.crontabs_stored_in_v1beta1(10).await;
    const ALPHA: &str = "/apis/storagemigration.k8s.io/v1alpha1/storageversionmigrations";
    let mut alpha = migration("alpha", "example.com", "crontabs");
    alpha["apiVersion"] = json!("storagemigration.k8s.io/v1alpha1");
    let (code, refused) = api.post(ALPHA, &alpha).await;
    assert_eq!(
        (code, refused["message"].as_str().unwrap_or_default()),
        (
            422,
            r#"StorageVersionMigration.storagemigration.k8s.io "alpha" is invalid: spec.resource.version: Required value: version is required"#
        )
    );
    alpha["spec"]["resource"]["version"] = json!("v1");
    let (code, created) = api.post(ALPHA, &alpha).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["resource"], json!({"group": "example.com", "version": "v1", "resource": "crontabs"}));
    assert_eq!(condition(&api.finished("alpha").await, "Succeeded").0, "True");
    assert!(stored_versions(&*server.server().state().store).await.iter().all(|v| v == "example.com/v1"));
    let read = api.get(&format!("{ALPHA}/alpha")).await;
    assert_eq!(read["apiVersion"], "storagemigration.k8s.io/v1alpha1");
    assert_eq!(read["spec"]["resource"]["version"], "v1");
    let succeeded = read["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Succeeded").unwrap();
    assert!(succeeded["lastUpdateTime"].is_string() && succeeded.get("lastTransitionTime").is_none(), "{read}");
    let beta = api.get(&format!("{MIGRATIONS}/alpha")).await;
    assert_eq!(beta["spec"]["resource"], json!({"group": "example.com", "resource": "crontabs"}));
    assert!(beta["status"]["conditions"][0]["lastTransitionTime"].is_string(), "{beta}");
    // Discovery: both versions, v1beta1 preferred, one storage version hash.
    let group = api.get("/apis/storagemigration.k8s.io").await;
    assert_eq!(group["preferredVersion"]["version"], "v1beta1");
    let hash = |list: Value| list["resources"][0]["storageVersionHash"].clone();
    let alpha_hash = hash(api.get("/apis/storagemigration.k8s.io/v1alpha1").await);
    assert_eq!(alpha_hash, hash(api.get("/apis/storagemigration.k8s.io/v1beta1").await));
    assert!(alpha_hash.is_string());
}

on_each_backend!(
    migrates_every_object_to_the_storage_version,
    migrations_are_validated_and_fail_as_upstream,
    v1alpha1_is_served_and_stored_as_v1beta1,
);

/// A conversion the migrator cannot make fails the migration as upstream words it, and leaves
/// every object as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_whose_conversion_fails_fails_and_changes_nothing() {
    let server = TestServer::start().await.unwrap();
    let api = Client::of(&server);
    let mut unreachable = crd("v1beta1");
    unreachable["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:9/convert"}}});
    let (code, body) = api.post(CRDS, &unreachable).await;
    assert_eq!(code, 201, "{body}");
    api.wait_served(CRONTABS).await;
    for n in 0..5 {
        let object =
            json!({"apiVersion": "example.com/v1beta1", "kind": "CronTab", "metadata": {"name": format!("c{n}")}});
        assert_eq!(api.post(CRONTABS, &object).await.0, 201);
    }
    let mut current = api.get(&format!("{CRDS}/crontabs.example.com")).await;
    current["spec"]["versions"] = crd("v1")["spec"]["versions"].clone();
    assert_eq!(api.send(reqwest::Method::PUT, &format!("{CRDS}/crontabs.example.com"), Some(&current)).await.0, 200);
    let store = Arc::clone(&server.server().state().store);
    let before =
        store.list(ListOptions { prefix: "/registry/example.com/crontabs/", ..Default::default() }).await.unwrap();

    api.post(MIGRATIONS, &migration("unconvertible", "example.com", "crontabs")).await;
    let failed = api.finished("unconvertible").await;
    assert_eq!(
        condition(&failed, "Failed"),
        ("True".into(), "StorageVersionMigrationFailed".into(), "migration encountered unhandled error".into()),
        "{failed}"
    );
    assert_eq!(condition(&failed, "Running").0, "False");
    let after =
        store.list(ListOptions { prefix: "/registry/example.com/crontabs/", ..Default::default() }).await.unwrap();
    assert_eq!(before.entries, after.entries, "nothing was written");
}

/// A migration a stopped server left running is finished by the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_left_running_resumes_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
    let server = TestServer::start_with(Config::default(), Arc::clone(&store)).await.unwrap();
    let api = Client::of(&server);
    api.crontabs_stored_in_v1beta1(20).await;
    server.shutdown().await;
    // What a server stopped in the middle leaves: a recorded revision, Running.
    let mut left = migration("interrupted", "example.com", "crontabs");
    left["metadata"]["uid"] = json!("1d6a3c80-0000-4000-8000-000000000001");
    left["metadata"]["creationTimestamp"] = json!("2026-12-01T10:00:00Z");
    left["status"] = json!({"resourceVersion": "2", "conditions": [{"type": "Running", "status": "True",
        "lastTransitionTime": "2026-12-01T10:00:00Z", "reason": "StorageVersionMigrationInProgress", "message": ""}]});
    store.create("/registry/storageversionmigrations/interrupted", left.to_string().into_bytes()).await.unwrap();
    assert!(stored_versions(&*store).await.iter().all(|v| v == "example.com/v1beta1"));

    let server = TestServer::start_with(Config::default(), Arc::clone(&store)).await.unwrap();
    let done = Client::of(&server).finished("interrupted").await;
    assert_eq!(condition(&done, "Succeeded").0, "True", "{done}");
    assert_eq!(done["status"]["resourceVersion"], "2", "recorded once");
    assert!(stored_versions(&*store).await.iter().all(|v| v == "example.com/v1"));
}

/// `auto_migrate`: a storage version change alone leads to a migration that succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_version_change_triggers_a_migration_when_asked() {
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::memory::open());
    let config = Config { auto_migrate: true, ..Config::default() };
    let server = TestServer::start_with(config, Arc::clone(&store)).await.unwrap();
    let api = Client::of(&server);
    api.crontabs_stored_in_v1beta1(30).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let name = loop {
        let listed = api.get(MIGRATIONS).await;
        if let Some(name) = listed["items"][0]["metadata"]["name"].as_str() {
            break name.to_string();
        }
        assert!(Instant::now() < deadline, "no migration was created");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(name.starts_with("crontabs.example.com-"), "{name}");
    assert_eq!(condition(&api.finished(&name).await, "Succeeded").0, "True");
    assert!(stored_versions(&*store).await.iter().all(|v| v == "example.com/v1"));
    assert_eq!(api.get(MIGRATIONS).await["items"].as_array().unwrap().len(), 1, "one change, one migration");
}

/// Two replicas on one etcd: one leads and runs the migration, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_of_two_runs_a_migration() {
    let cluster = crdctl_storage::etcd::cluster::LocalCluster::start(1).expect("etcd starts");
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let config = crdctl_storage::etcd::EtcdConfig::new(cluster.endpoints());
        let store: Arc<dyn Store> = Arc::new(crdctl_storage::etcd::open(config).await.unwrap());
        replicas.push(TestServer::start_with(Config { watch_cache: true, ..Config::default() }, store).await.unwrap());
    }
    let first = Client::of(&replicas[0]);
    first.crontabs_stored_in_v1beta1(40).await;
    first.post(MIGRATIONS, &migration("crontabs", "example.com", "crontabs")).await;
    // Read through the other replica: both serve the one store.
    let done = Client::of(&replicas[1]).finished("crontabs").await;
    assert_eq!(condition(&done, "Succeeded").0, "True");
    let mut leaders = 0;
    let mut runs = 0;
    for replica in &replicas {
        let metrics = Client::of(replica).metrics().await;
        leaders +=
            usize::from(metrics.contains(r#"leader_election_master_status{name="crdctl-controller-manager"} 1"#));
        runs += usize::from(metrics.contains(
            r#"crdctl_storage_version_migrations_total{resource="crontabs.example.com",result="succeeded"} 1"#,
        ));
    }
    assert_eq!((leaders, runs), (1, 1));
    let lease = first.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/crdctl-controller-manager").await;
    assert!(lease["spec"]["holderIdentity"].as_str().is_some_and(|h| !h.is_empty()), "{lease}");
}

/// Discovery's `storageVersionHash` changes exactly when the storage version does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storage_version_hash_follows_the_storage_version() {
    let server = TestServer::start().await.unwrap();
    let api = Client::of(&server);
    let hash = |list: Value| {
        let resources = list["resources"].as_array().cloned().unwrap_or_default();
        let crontabs = resources.into_iter().find(|r| r["name"] == "crontabs").unwrap_or_default();
        crontabs["storageVersionHash"].as_str().unwrap_or_default().to_string()
    };
    api.crontabs_stored_in_v1beta1(0).await;
    let v1 = hash(api.get("/apis/example.com/v1").await);
    assert_eq!(v1, hash(api.get("/apis/example.com/v1beta1").await), "one hash for every served version");
    let mut current = api.get(&format!("{CRDS}/crontabs.example.com")).await;
    current["spec"]["versions"] = crd("v1beta1")["spec"]["versions"].clone();
    assert_eq!(api.send(reqwest::Method::PUT, &format!("{CRDS}/crontabs.example.com"), Some(&current)).await.0, 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let v1beta1 = loop {
        let now = hash(api.get("/apis/example.com/v1").await);
        if now != v1 {
            break now;
        }
        assert!(Instant::now() < deadline, "the hash did not change");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // upstream's StorageVersionHash: base64 of the first 8 bytes of sha256("<group>/<version>/<kind>").
    assert_eq!((v1.as_str(), v1beta1.as_str()), ("bodr40kQYQo=", "7Zf9gZVeNNw="));
}
