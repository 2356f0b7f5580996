//! Size at scale: 100,000 and 1,000,000 stored CronTabs on the embedded redb store, next to one
//! etcd member (Debian's `etcd-server`) holding the same keys and values in the same run, each
//! behind the server.
//!
//! For each store: the time to restart on the data (redb: open the file, rebuild the in-memory
//! key index, start the server, answer a get; etcd: start the member on its data until it is
//! healthy, then answer a get through the server), the resident memory of the process that holds
//! the data (redb: a fresh process that restarts the server on it; etcd: the member) against the
//! objects' stored bytes, the time to list every object over HTTP in pages
//! of `limit=500`, and the mean latency of a get. Targets: redb's restart ≤ etcd's; redb's
//! memory ≤ 2× the stored bytes.
//!
//! Run: `cargo bench -p crdctl-bench --bench size` (`CRDCTL_BENCH_SIZES=100000` for one size).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its report")]

#[path = "common/targets.rs"]
mod targets;

#[path = "common/load.rs"]
#[allow(dead_code, reason = "this benchmark uses the connections and the runtime, not the measured loops")]
mod load;

#[path = "common/memory.rs"]
#[allow(dead_code, reason = "only the resident memory is read here, not the peak")]
mod memory;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_server::testing::TestServer;
use crdctl_storage::Store;
use crdctl_storage::etcd::EtcdConfig;
use crdctl_storage::etcd::cluster::LocalCluster;
use load::{Connection, Peer, v1_body};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const COLLECTION: &str = "/apis/example.com/v1/namespaces/default/crontabs";
const KEY_PREFIX: &str = "/registry/example.com/crontabs/default/";
/// Writes in flight while filling a store (the embedded one commits them in groups).
const FILL_CONCURRENCY: usize = 256;
/// Gets timed per store.
const GETS: usize = 2_000;

fn crd() -> String {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "string"}}}}}]}})
    .to_string()
}

fn name(i: usize) -> String {
    format!("crontab-{i:07}")
}

/// Starts a server on `store` on `peer`, with the CRD; the bytes of one object as stored.
async fn serve(peer: &Peer, store: Arc<dyn Store>, create: bool) -> (TestServer, Vec<u8>) {
    let server = peer.run(TestServer::start_with(crdctl_server::Config::default(), Arc::clone(&store))).await.unwrap();
    let mut connection = Connection::open(&server.url()).await;
    if create {
        let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        assert_eq!(connection.send(reqwest::Method::POST, path, Some(crd())).await.0, 201);
        let body = Some(v1_body(&name(0), "v1"));
        assert_eq!(connection.send(reqwest::Method::POST, COLLECTION, body).await.0, 201);
    }
    let stored = store.get(&format!("{KEY_PREFIX}{}", name(0))).await.unwrap().unwrap().value;
    (server, stored)
}

/// Writes objects 1..count through the store, each the stored object renamed.
async fn fill(store: &Arc<dyn Store>, template: &[u8], count: usize) -> Duration {
    let text = String::from_utf8(template.to_vec()).unwrap();
    let started = Instant::now();
    let workers: Vec<_> = (0..FILL_CONCURRENCY)
        .map(|worker| {
            let (store, text) = (Arc::clone(store), text.clone());
            tokio::spawn(async move {
                for i in (1..count).filter(|i| i % FILL_CONCURRENCY == worker) {
                    let value = text.replace(&name(0), &name(i)).into_bytes();
                    store.create(&format!("{KEY_PREFIX}{}", name(i)), value).await.unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    started.elapsed()
}

/// Every object over HTTP in pages of 500: the time, after checking the count.
async fn list_all(base: &str, count: usize) -> Duration {
    let mut connection = Connection::open(base).await;
    let (mut listed, mut token) = (0, String::new());
    let started = Instant::now();
    loop {
        let path = match token.as_str() {
            "" => format!("{COLLECTION}?limit=500"),
            token => format!("{COLLECTION}?limit=500&continue={token}"),
        };
        let (code, body) = connection.send(reqwest::Method::GET, &path, None).await;
        assert_eq!(code, 200);
        let page: serde_json::Value = serde_json::from_slice(&body).unwrap();
        listed += page["items"].as_array().unwrap().len();
        match page["metadata"]["continue"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_string(),
            _ => break,
        }
    }
    assert_eq!(listed, count);
    started.elapsed()
}

/// The mean time of a get over one connection, objects spread over the whole range.
async fn mean_get(base: &str, count: usize) -> Duration {
    let mut connection = Connection::open(base).await;
    let started = Instant::now();
    for i in 0..GETS {
        let object = name(i.wrapping_mul(7_919) % count);
        assert_eq!(connection.send(reqwest::Method::GET, &format!("{COLLECTION}/{object}"), None).await.0, 200);
    }
    started.elapsed() / GETS as u32
}

/// Waits until the server at `base` serves an object.
async fn first_get(base: &str) {
    let mut connection = Connection::open(base).await;
    let (code, _) = connection.send(reqwest::Method::GET, &format!("{COLLECTION}/{}", name(0)), None).await;
    assert_eq!(code, 200);
}

struct Measured {
    fill: Duration,
    restart: Duration,
    resident_kib: u64,
    resident_after_list_kib: u64,
    list: Duration,
    get: Duration,
}

async fn redb(count: usize) -> (Measured, u64) {
    let dir = tempfile::tempdir().unwrap();
    let peer = Peer::new(2);
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
    let (server, template) = serve(&peer, Arc::clone(&store), true).await;
    let fill = fill(&store, &template, count).await;
    let stored_bytes = store.stats().await.unwrap().value_bytes;
    peer.run(server.shutdown()).await;
    drop(store);
    drop(peer);
    // The old server's last tasks let go of the file in the background.
    let released = Instant::now();
    while let Err(err) = crdctl_storage::redb::open(dir.path()) {
        assert!(released.elapsed() < Duration::from_secs(30), "the store stays open: {err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The restart runs in a fresh process, so its memory is what holding the data takes (this
    // process's allocator keeps what filling the store used).
    let [restart, resident_kib, resident_after_list_kib, list, get] = restarted(dir.path(), count);
    let measured = Measured {
        fill,
        restart: Duration::from_micros(restart),
        resident_kib,
        resident_after_list_kib,
        list: Duration::from_micros(list),
        get: Duration::from_micros(get),
    };
    (measured, stored_bytes)
}

/// Runs the restart in a fresh process of this binary; its five numbers.
fn restarted(dir: &std::path::Path, count: usize) -> [u64; 5] {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([RESTART_REDB, &dir.display().to_string(), &count.to_string()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let numbers: Vec<u64> =
        String::from_utf8(output.stdout).unwrap().split_whitespace().map(|n| n.parse().unwrap()).collect();
    numbers.try_into().unwrap()
}

/// The argument that makes this binary the restarted redb server.
const RESTART_REDB: &str = "--restart-redb";

/// In the fresh process: restart on `dir`, list and get; prints the times in microseconds and
/// the resident memory in KiB. With `count` 0, on an empty directory given the CRD and one
/// object: the process's own memory, the baseline of the others.
async fn restart_redb(dir: &str, count: usize) {
    let peer = Peer::new(2);
    let started = Instant::now();
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::redb::open(std::path::Path::new(dir)).unwrap());
    // An empty directory is the baseline: the server with the CRD and one object.
    let (server, _) = serve(&peer, store, count == 0).await;
    first_get(&server.url()).await;
    let restart = started.elapsed();
    let resident_kib = memory::resident_kib("self");
    let list = list_all(&server.url(), count.max(1)).await;
    let resident_after_list_kib = memory::resident_kib("self");
    let get = mean_get(&server.url(), count.max(1)).await;
    println!(
        "{} {resident_kib} {resident_after_list_kib} {} {}",
        restart.as_micros(),
        list.as_micros(),
        get.as_micros()
    );
}

async fn etcd(count: usize) -> Measured {
    let mut cluster = LocalCluster::start(1).unwrap_or_else(|err| panic!("etcd starts: {err}"));
    let endpoints = cluster.endpoints();
    let config = || EtcdConfig::new(endpoints.clone());
    let peer = Peer::new(2);
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::etcd::open(config()).await.unwrap());
    let (server, template) = serve(&peer, Arc::clone(&store), true).await;
    let fill = fill(&store, &template, count).await;
    peer.run(server.shutdown()).await;
    drop(store);

    let started = Instant::now();
    cluster.restart(0).unwrap();
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::etcd::open(config()).await.unwrap());
    let (server, _) = serve(&peer, Arc::clone(&store), false).await;
    first_get(&server.url()).await;
    let restart = started.elapsed();
    let pid = cluster.pid(0).unwrap().to_string();
    let resident_kib = memory::resident_kib(&pid);
    let list = list_all(&server.url(), count).await;
    let resident_after_list_kib = memory::resident_kib(&pid);
    let get = mean_get(&server.url(), count).await;
    Measured { fill, restart, resident_kib, resident_after_list_kib, list, get }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == RESTART_REDB) {
        return restart_redb(&args[at + 1], args[at + 2].parse().unwrap()).await;
    }
    let sizes: Vec<usize> = std::env::var("CRDCTL_BENCH_SIZES")
        .map(|sizes| sizes.split(',').map(|n| n.trim().parse().unwrap()).collect())
        .unwrap_or_else(|_| vec![100_000, 1_000_000]);
    let empty = tempfile::tempdir().unwrap();
    let [_, empty_kib, ..] = restarted(empty.path(), 0);
    println!("a server on an empty store: {:.1} MiB resident", empty_kib as f64 / 1024.0);
    let mut targets = targets::Targets::default();
    for count in sizes {
        let (redb, stored_bytes) = redb(count).await;
        let etcd = etcd(count).await;
        let stored_mib = stored_bytes as f64 / (1 << 20) as f64;
        println!("{count} objects, {stored_mib:.0} MiB stored ({} bytes each)", stored_bytes / count as u64);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!("  {:<28}{:>14}{:>14}{:>12}", "", "redb", "etcd", "redb÷etcd");
        let row = |what: &str, redb: f64, etcd: f64, unit: &str| {
            println!("  {what:<28}{:>11.1} {unit:<2}{:>11.1} {unit:<2}{:>12.2}", redb, etcd, redb / etcd);
        };
        row("fill (256 writers)", ms(redb.fill) / 1e3, ms(etcd.fill) / 1e3, "s");
        row("restart to first get", ms(redb.restart), ms(etcd.restart), "ms");
        row("resident after restart", redb.resident_kib as f64 / 1024.0, etcd.resident_kib as f64 / 1024.0, "MiB");
        row(
            "resident after the list",
            redb.resident_after_list_kib as f64 / 1024.0,
            etcd.resident_after_list_kib as f64 / 1024.0,
            "MiB",
        );
        row("list all, limit=500", ms(redb.list) / 1e3, ms(etcd.list) / 1e3, "s");
        row("get (mean of 2,000)", redb.get.as_secs_f64() * 1e6, etcd.get.as_secs_f64() * 1e6, "µs");
        let share = |kib: u64| kib as f64 * 1024.0 / stored_bytes as f64;
        println!(
            "  redb resident ÷ stored bytes: {:.2} after restart, {:.2} after the list (target ≤ 2); less the empty server's: {:.2}, {:.2}",
            share(redb.resident_kib),
            share(redb.resident_after_list_kib),
            share(redb.resident_kib.saturating_sub(empty_kib)),
            share(redb.resident_after_list_kib.saturating_sub(empty_kib)),
        );
        targets.expect(
            redb.restart <= etcd.restart,
            format!(
                "{count} objects: restart {:.0} ms, etcd's {:.0} ms (≤ etcd's)",
                ms(redb.restart),
                ms(etcd.restart)
            ),
        );
        let most = share(redb.resident_kib).max(share(redb.resident_after_list_kib));
        targets.expect(most <= 2.0, format!("{count} objects: resident {most:.2}× the stored bytes (≤ 2)"));
    }
    targets.finish();
}
