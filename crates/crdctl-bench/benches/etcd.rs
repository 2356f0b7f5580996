//! `crdctl serve` on etcd with 1 and 3 replicas, against etcd's own put rate measured in the
//! same run with the same value size (the bound any kube-apiserver on etcd lives under), and
//! the embedded redb store for comparison. The servers and the load generator have runtimes
//! of their own, as they would be separate processes.
//!
//! One local etcd member (Debian's `etcd-server`, fsync on) on free loopback ports. Baselines:
//! plain etcd puts of a stored CronTab's bytes from 1 and 16 concurrent clients. Then the server,
//! in-process, each replica with its watch cache: creates/s from 1 and 16 clients (spread
//! over the replicas), the time to list every object with `resourceVersion=""` (read from
//! etcd) and `resourceVersion=0` (from the watch cache), and the watch latency — from a create
//! acknowledged by the first replica to its event on a watch on the last one.
//!
//! Run: `cargo bench -p crdctl-bench --bench etcd`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/load.rs"]
#[allow(dead_code, reason = "ConfigMap creates are measured by the server benchmark, on redb")]
mod load;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_server::testing::TestServer;
use crdctl_storage::Store;
use crdctl_storage::etcd::cluster::LocalCluster;
use crdctl_storage::etcd::{EtcdConfig, EtcdStore};
use load::{Load, Peer, Post, v1_body};
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Creates timed for the watch latency.
const LATENCY_SAMPLES: usize = 200;

/// Plain etcd puts of `value` from `clients` concurrent tasks.
async fn etcd_puts(endpoints: &[String], value: &[u8], clients: usize) -> f64 {
    use crdctl_storage::etcd::api::etcdserverpb::{PutRequest, kv_client::KvClient};
    let endpoints = endpoints.iter().map(|e| tonic::transport::Endpoint::from_shared(e.clone()).unwrap());
    let kv = KvClient::new(tonic::transport::Channel::balance_list(endpoints));
    let value = value.to_vec();
    load::rate(clients, move |task, i| {
        let (mut kv, value) = (kv.clone(), value.clone());
        async move {
            let key = format!("/baseline/{task}/{i}").into_bytes();
            kv.put(PutRequest { key, value, ..Default::default() }).await.unwrap();
        }
    })
    .await
}

/// A store on etcd under `prefix`, made on `peer` (its connection lives where its server runs).
async fn etcd_store(peer: &Peer, endpoints: &[String], prefix: &str) -> Arc<EtcdStore> {
    let mut config = EtcdConfig::new(endpoints.to_vec());
    config.prefix = prefix.to_string();
    Arc::new(peer.run(crdctl_storage::etcd::open(config)).await.unwrap())
}

fn crd() -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "string"}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}]}})
}

/// `replicas` servers on `store`'s etcd (all but the first get their own connection), the
/// CRD installed and served by each.
async fn replicas(peer: &Peer, stores: Vec<Arc<dyn Store>>, watch_cache: bool) -> (Vec<TestServer>, Arc<Load>) {
    let mut servers = Vec::new();
    for store in stores {
        let config = crdctl_server::Config { watch_cache, ..crdctl_server::Config::default() };
        servers.push(peer.run(TestServer::start_with(config, store)).await.unwrap());
    }
    let load = Arc::new(Load::new(servers.iter().map(TestServer::url).collect()));
    let (code, body) = load
        .send(reqwest::Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Some(crd().to_string()))
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    for replica in 0..servers.len() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while load
            .send_to(replica, reqwest::Method::GET, "/apis/example.com/v1/namespaces/default/crontabs", None)
            .await
            .0
            != 200
        {
            assert!(Instant::now() < deadline, "replica {replica} never served the CRD");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    (servers, load)
}

/// Creates through the first replica, one at a time, each timed from the request sent to its
/// answer and to its event on a watch on the last replica: (answer median, event median,
/// event 99th percentile).
async fn watch_latency(load: &Load, replicas: usize) -> (Duration, Duration, Duration) {
    let path = "/apis/example.com/v1/namespaces/default/crontabs";
    let (_, list) = load.send_to(replicas - 1, reqwest::Method::GET, path, None).await;
    let rv =
        serde_json::from_slice::<Value>(&list).unwrap()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let url = format!("{}{path}?watch=1&resourceVersion={rv}", load.base(replicas - 1));
    let mut watch = reqwest::Client::new().get(url).send().await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let reader = tokio::spawn(async move {
        let mut buffer = Vec::new();
        while let Ok(Some(chunk)) = watch.chunk().await {
            let arrived = Instant::now();
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                let event: Value = serde_json::from_slice(&line).unwrap();
                let name = event["object"]["metadata"]["name"].as_str().unwrap_or_default().to_string();
                if tx.send((name, arrived)).is_err() {
                    return;
                }
            }
        }
    });
    let (mut answers, mut events) = (Vec::new(), Vec::new());
    for i in 0..LATENCY_SAMPLES {
        let name = format!("latency-{i:04}");
        let sent = Instant::now();
        let (code, _) = load.send_to(0, reqwest::Method::POST, path, Some(v1_body(&name, "v1"))).await;
        assert_eq!(code, 201);
        answers.push(sent.elapsed());
        loop {
            let (seen, arrived) = rx.recv().await.expect("the watch delivers the event");
            if seen == name {
                events.push(arrived.saturating_duration_since(sent));
                break;
            }
        }
    }
    reader.abort();
    answers.sort();
    events.sort();
    (answers[answers.len() / 2], events[events.len() / 2], events[events.len() * 99 / 100])
}

fn ratio(rate: f64, baseline: f64) -> String {
    format!("{:.0}%", rate / baseline * 100.0)
}

fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

/// Creates, lists and watch latency through `servers` replicas; prints one block.
async fn measure(
    peer: &Peer,
    label: &str,
    stores: Vec<Arc<dyn Store>>,
    watch_cache: bool,
    (puts_1, puts_16): (f64, f64),
) {
    let replica_count = stores.len();
    let (_servers, load) = replicas(peer, stores, watch_cache).await;
    let (creates_1, made_1) = load.creates(Post::crontabs("v1", v1_body), 1, None, "one").await;
    let (creates_16, made_16) = load.creates(Post::crontabs("v1", v1_body), 16, None, "many").await;
    let total = made_1 + made_16;
    let listed = load.list("v1", "", total).await;
    let cached = load.list("v1", "resourceVersion=0", total).await;
    let sample =
        Arc::new((0..made_16.min(64)).map(|i| format!("many-{:02}-{:06}", i % 16, i / 16)).collect::<Vec<_>>());
    let gets_16 = load.gets(sample, 16).await;
    let (answer, median, p99) = watch_latency(&load, replica_count).await;
    println!("{label:<42} per second   ÷ etcd puts (same client count)");
    println!("  creates, 1 client                     {creates_1:>10.0}   {}", ratio(creates_1, puts_1));
    println!("  creates, 16 clients                   {creates_16:>10.0}   {}", ratio(creates_16, puts_16));
    println!("  gets, 16 clients                      {gets_16:>10.0}");
    println!("  list {total} objects, resourceVersion=\"\"  {:>10}", ms(listed));
    println!("  list {total} objects, resourceVersion=0   {:>10}", ms(cached));
    println!("  create answered, median               {:>10}", ms(answer));
    println!("  create to watch event, median / p99   {:>10} / {}", ms(median), ms(p99));
}

// The load generator runs here; the servers have a runtime of their own (see `Peer`).
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let peer = Peer::new(2);
    let etcd = LocalCluster::start(1).unwrap_or_else(|err| panic!("etcd starts: {err}"));
    let endpoints = etcd.endpoints();

    // The value size of a stored CronTab, read back from a server.
    let probe = etcd_store(&peer, &endpoints, "/probe").await;
    let (_probe_server, probe_load) = replicas(&peer, vec![probe.clone()], false).await;
    let (code, _) = probe_load
        .send(
            reqwest::Method::POST,
            "/apis/example.com/v1/namespaces/default/crontabs",
            Some(v1_body("crontab-000000", "v1")),
        )
        .await;
    assert_eq!(code, 201);
    let value = probe.get("/registry/example.com/crontabs/default/crontab-000000").await.unwrap().unwrap().value;

    let puts_1 = etcd_puts(&endpoints, &value, 1).await;
    let puts_16 = etcd_puts(&endpoints, &value, 16).await;
    println!("baseline: etcd puts of {} bytes            per second", value.len());
    println!("  1 client                              {puts_1:>10.0}");
    println!("  16 clients                            {puts_16:>10.0}   {}", ratio(puts_16, puts_1));

    let one: Arc<dyn Store> = etcd_store(&peer, &endpoints, "/one").await;
    measure(&peer, "crdctl, 1 replica on etcd", vec![one], true, (puts_1, puts_16)).await;
    let mut three: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..3 {
        three.push(etcd_store(&peer, &endpoints, "/three").await);
    }
    measure(&peer, "crdctl, 3 replicas on etcd", three, true, (puts_1, puts_16)).await;

    let dir = tempfile::tempdir().unwrap();
    let redb: Arc<dyn Store> = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
    measure(&peer, "crdctl, embedded redb (for comparison)", vec![redb], false, (puts_1, puts_16)).await;
}
