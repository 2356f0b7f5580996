//! Storage version migration throughput and memory, against `crdctl serve` on redb in a child
//! process, the client's way and the server's.
//!
//! - Baseline: the server's raw update rate for the same objects — another CRD with the same
//!   objects, listed first (not timed), then each PUT back unchanged from as many concurrent
//!   clients as the migration uses. Every PUT rewrites an object from v1beta1 to v1, exactly
//!   the work of a migration without its listing, bookkeeping and progress record.
//! - Client side: `crdctl_migrate::migrate` with `client_side` over one CRD, in this process
//!   (the server runs in a child, so this process's memory is the migration's): a list page,
//!   then a PUT per object.
//! - Server side: `crdctl_migrate::migrate` over another CRD with the same objects, which
//!   creates a `StorageVersionMigration` and follows it while the server's migrator rewrites
//!   the objects in the store (no request per object). Target: ≥ 2× the client side.
//! - Peak memory: the growth of the peak RSS of the process doing the rewrite (reset with
//!   `/proc/<pid>/clear_refs` before it starts), at 10,000 and 100,000 objects. Target: flat.
//!
//! Run: `cargo bench -p crdctl-bench --bench migrate`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

#[path = "common/memory.rs"]
mod memory;

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use crdctl_migrate::{Cluster, Options, Quiet};
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CONCURRENCY: usize = 8;
const SERVER_CHILD: &str = "CRDCTL_BENCH_SERVER_DIR";

/// The child: a server on redb in the given directory, until standard input closes.
fn serve(dir: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = Arc::new(crdctl_storage::redb::open(std::path::Path::new(dir)).unwrap());
        let server = crdctl_server::Server::start(crdctl_server::Config::default(), store).await.unwrap();
        println!("{}", server.url());
        std::io::stdout().flush().unwrap();
        tokio::task::spawn_blocking(|| std::io::stdin().lock().lines().count()).await.unwrap();
    });
}

struct Child {
    process: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

fn start_server() -> Child {
    let dir = tempfile::tempdir().unwrap();
    let mut process = std::process::Command::new(std::env::current_exe().unwrap())
        .env(SERVER_CHILD, dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(process.stdout.take().unwrap()).read_line(&mut line).unwrap();
    Child { process, url: line.trim().to_string(), _dir: dir }
}

fn crd(group: &str, storage_v1: bool) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "string"}}}});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": format!("crontabs.{group}")},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [{"name": "v1beta1", "served": true, "storage": !storage_v1, "schema": schema},
                         {"name": "v1", "served": true, "storage": storage_v1, "schema": schema}]}})
}

async fn send(http: &reqwest::Client, method: reqwest::Method, url: &str, body: &Value) -> Value {
    let response = http
        .request(method, url)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert!(code < 300, "{code}: {body}");
    body
}

/// A CRD with `count` objects stored as v1beta1, then v1 as its storage version.
async fn populate(http: &reqwest::Client, base: &str, group: &str, count: usize) {
    let crds = format!("{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    let created = send(http, reqwest::Method::POST, &crds, &crd(group, false)).await;
    let url = format!("{base}/apis/{group}/v1beta1/namespaces/default/crontabs");
    let tasks: Vec<_> = (0..16)
        .map(|client| {
            let (http, url, group) = (http.clone(), url.clone(), group.to_string());
            tokio::spawn(async move {
                for i in (client..count).step_by(16) {
                    let object = json!({"apiVersion": format!("{group}/v1beta1"), "kind": "CronTab",
                        "metadata": {"name": format!("ct-{i:06}")}, "host": format!("host-{i}"), "port": "80"});
                    send(&http, reqwest::Method::POST, &url, &object).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let mut switched = crd(group, true);
    switched["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    send(http, reqwest::Method::PUT, &format!("{crds}/crontabs.{group}"), &switched).await;
}

/// PUTs every object of the group back unchanged (listed first, untimed): updates per second.
async fn raw_updates(http: &reqwest::Client, base: &str, group: &str) -> f64 {
    let list = send(http, reqwest::Method::GET, &format!("{base}/apis/{group}/v1/crontabs"), &Value::Null).await;
    let items = Arc::new(list["items"].as_array().unwrap().clone());
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|client| {
            let (http, items, base, group) = (http.clone(), Arc::clone(&items), base.to_string(), group.to_string());
            tokio::spawn(async move {
                for object in items.iter().skip(client).step_by(CONCURRENCY) {
                    let name = object["metadata"]["name"].as_str().unwrap();
                    let url = format!("{base}/apis/{group}/v1/namespaces/default/crontabs/{name}");
                    let written = send(&http, reqwest::Method::PUT, &url, object).await;
                    assert_ne!(written["metadata"]["resourceVersion"], object["metadata"]["resourceVersion"]);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    items.len() as f64 / started.elapsed().as_secs_f64()
}

/// Migrates `crontabs.<group>` on the client side or the server's: objects per second, and the
/// growth of the peak RSS of the process that rewrites them (this one, or the server).
async fn migration(server: &Child, group: &str, count: usize, client_side: bool) -> (f64, u64) {
    let client = kube::Client::try_from(kube::Config::new(server.url.parse().unwrap())).unwrap();
    let cluster = Cluster::new(client);
    let rewriter = if client_side { "self".to_string() } else { server.process.id().to_string() };
    // Peak RSS from here on (Linux: writing 5 to clear_refs resets VmHWM).
    std::fs::write(format!("/proc/{rewriter}/clear_refs"), "5").unwrap();
    let before = memory::resident_kib(&rewriter);
    let options = Options { concurrency: CONCURRENCY, client_side, ..Options::default() };
    let started = Instant::now();
    let summary = crdctl_migrate::migrate(&cluster, &format!("crontabs.{group}"), &options, &Quiet).await.unwrap();
    let rate = count as f64 / started.elapsed().as_secs_f64();
    let rewritten_here = summary.rewritten == count as u64 && summary.migration.is_none();
    assert!(summary.finished && (rewritten_here == client_side), "{summary:?}");
    (rate, memory::peak_kib(&rewriter).saturating_sub(before))
}

fn main() {
    if let Ok(dir) = std::env::var(SERVER_CHILD) {
        return serve(&dir);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        println!("{CONCURRENCY} concurrent writers, redb, objects stored as v1beta1 → v1   per second");
        let mut memory_lines = Vec::new();
        let mut targets = targets::Targets::default();
        for count in [10_000, 100_000] {
            let server = start_server();
            if count == 10_000 {
                populate(&http, &server.url, "baseline.example.com", count).await;
            }
            populate(&http, &server.url, "client.example.com", count).await;
            populate(&http, &server.url, "server.example.com", count).await;
            let (client, client_grew) = migration(&server, "client.example.com", count, true).await;
            let (in_server, server_grew) = migration(&server, "server.example.com", count, false).await;
            let objects = format!("{count} objects");
            if count == 10_000 {
                let raw = raw_updates(&http, &server.url, "baseline.example.com").await;
                println!("  raw updates (PUT each object back, pre-listed), {objects:<16} {raw:>8.0}   100%");
                println!("  crdctl migrate --client-side, {objects:<30} {client:>8.0}   {:.0}%", client / raw * 100.0);
                println!(
                    "  StorageVersionMigration (in the server), {objects:<19} {in_server:>8.0}   {:.0}%",
                    in_server / raw * 100.0
                );
            } else {
                println!("  crdctl migrate --client-side, {objects:<30} {client:>8.0}");
                println!("  StorageVersionMigration (in the server), {objects:<19} {in_server:>8.0}");
            }
            println!("  in the server ÷ client side, {objects:<31} {:>8.2}×  (target ≥ 2)", in_server / client);
            targets.expect(
                in_server / client >= 2.0,
                format!("{objects}: in the server {:.2}× the client side (≥ 2)", in_server / client),
            );
            memory_lines.push((objects, client_grew, server_grew));
            drop(server);
        }
        println!("peak memory of the rewrite (growth of the rewriting process's peak RSS)   client   server");
        for (objects, client, server) in &memory_lines {
            println!("  {objects:<70} {:>5.1} MiB {:>5.1} MiB", *client as f64 / 1024.0, *server as f64 / 1024.0);
        }
        // Flat: the growth at 100,000 objects within +20% (and 1 MiB) of the growth at 10,000.
        if let [(_, client_small, server_small), (_, client_large, server_large)] = memory_lines[..] {
            let flat = |small: u64, large: u64| large as f64 <= small as f64 * 1.2 + 1024.0;
            targets.expect(
                flat(client_small, client_large),
                "the client side's peak memory flat from 10,000 to 100,000 objects",
            );
            targets.expect(
                flat(server_small, server_large),
                "the server's peak memory flat from 10,000 to 100,000 objects",
            );
        }
        targets.finish();
    });
}

impl Drop for Child {
    fn drop(&mut self) {
        drop(self.process.stdin.take());
        let _ = self.process.wait();
    }
}
