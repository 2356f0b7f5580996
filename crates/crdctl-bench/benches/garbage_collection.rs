//! Cascading deletion of 10,000 dependents by the garbage collector, against a server on redb
//! in this process.
//!
//! - Baseline: the same 10,000 ConfigMaps deleted by one `deletecollection` (a label selector),
//!   timed until the request returns — the server's own rate of deleting that many objects.
//! - Background: an owner with 10,000 dependents (`ownerReferences`) deleted; timed until the
//!   last dependent is gone from the store.
//! - Foreground: the same with `propagationPolicy: Foreground` and `blockOwnerDeletion`; timed
//!   until the owner itself is gone (after every dependent).
//!
//! Each is reported with its ratio to the baseline. Run:
//! `cargo bench -p crdctl-bench --bench garbage_collection`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_storage::{ListOptions, Store};
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEPENDENTS: usize = 10_000;
const CLIENTS: usize = 16;
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const PREFIX: &str = "/registry/configmaps/default/";

struct Bench {
    url: String,
    http: reqwest::Client,
    store: Arc<dyn Store>,
}

impl Bench {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
        response.json().await.unwrap()
    }

    /// Creates `DEPENDENTS` ConfigMaps named `<prefix>-<n>` from `CLIENTS` clients at once.
    async fn create_many(&self, prefix: &str, metadata: Value) {
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let clients = (0..CLIENTS).map(|_| {
            let next = Arc::clone(&next);
            let metadata = metadata.clone();
            async move {
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= DEPENDENTS {
                        break;
                    }
                    let mut metadata = metadata.clone();
                    metadata["name"] = json!(format!("{prefix}-{n}"));
                    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
                    self.send(reqwest::Method::POST, CONFIGMAPS, Some(object)).await;
                }
            }
        });
        futures_util::future::join_all(clients).await;
    }

    async fn count(&self, prefix: &str) -> usize {
        let prefix = format!("{PREFIX}{prefix}");
        self.store.list(ListOptions { prefix: &prefix, ..Default::default() }).await.unwrap().entries.len()
    }

    /// Waits until no ConfigMap named `<prefix>…` is left; how long since `start`.
    async fn until_gone(&self, prefix: &str, start: Instant) -> Duration {
        while self.count(prefix).await > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        start.elapsed()
    }

    /// An owner with `DEPENDENTS` dependents, deleted with `policy`; how long until the owner
    /// and every dependent are gone.
    async fn cascade(&self, policy: &str) -> Duration {
        let owner_name = format!("owner-{}", policy.to_lowercase());
        let owner = self
            .send(
                reqwest::Method::POST,
                CONFIGMAPS,
                Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": owner_name}})),
            )
            .await;
        let reference = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner_name,
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]);
        let dependents = format!("of-{}", policy.to_lowercase());
        self.create_many(&dependents, json!({"ownerReferences": reference})).await;
        let start = Instant::now();
        let options = json!({"propagationPolicy": policy});
        self.send(reqwest::Method::DELETE, &format!("{CONFIGMAPS}/{owner_name}"), Some(options)).await;
        let dependents_gone = self.until_gone(&dependents, start).await;
        let owner_gone = self.until_gone(&owner_name, start).await;
        dependents_gone.max(owner_gone)
    }
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
        let server = crdctl_server::Server::start(crdctl_server::Config::default(), Arc::clone(&store)).await.unwrap();
        let bench = Bench { url: server.url(), http: reqwest::Client::new(), store };

        bench.create_many("plain", json!({"labels": {"set": "plain"}})).await;
        let start = Instant::now();
        bench.send(reqwest::Method::DELETE, &format!("{CONFIGMAPS}?labelSelector=set%3Dplain"), None).await;
        let collection = start.elapsed();
        assert_eq!(bench.count("plain").await, 0);
        let background = bench.cascade("Background").await;
        let foreground = bench.cascade("Foreground").await;

        println!("{:<52} {:>10} {:>12}", format!("deleting {DEPENDENTS} ConfigMaps (redb)"), "seconds", "÷ baseline");
        let row = |what: &str, took: Duration| {
            let ratio = took.as_secs_f64() / collection.as_secs_f64();
            println!("  {what:<50} {:>10.2} {:>11.2}×", took.as_secs_f64(), ratio);
        };
        row("one deletecollection (baseline)", collection);
        row("owner deleted, background: last dependent gone", background);
        row("owner deleted, foreground: owner gone", foreground);
        server.shutdown().await;
    });
}
