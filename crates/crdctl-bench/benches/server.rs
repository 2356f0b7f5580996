//! `crdctl serve` throughput on the embedded redb store, against the store's own durable commit
//! rate measured in the same run.
//!
//! Baselines: raw redb (one durable transaction per write, the floor of any durable write),
//! measured in slices alternating with the one-client creates; an HTTP endpoint on the same
//! stack that does nothing but that raw commit (the ceiling a one-client create can reach once
//! the HTTP round trip is paid), in the same slices; and the store engine with 1 and 16 writers
//! on the server's runtime (a lone writer commits in place, 16 share commits: group commit).
//! Then the server, in-process on a random loopback port, driven over HTTP by a Rust load
//! generator (a hyper connection per client) with 1 and 16 concurrent clients: creates/s,
//! gets/s and the time to list 10,000 objects, for a CRD with the None strategy and one whose
//! objects pass through the CronTab conversion webhook (HTTPS, the example converter on the
//! framework). The server, the webhook and the load generator each have a runtime of their own,
//! as they would be three processes. Targets: creates with one client ≥ 50% of the raw
//! single-writer commit rate; with 16 clients, more creates/s than that rate. ConfigMaps (a
//! built-in kind) are created in the same slices as the None CronTabs: target ≥ 90% of their rate.
//!
//! One client is measured twice, each time with its own raw and ceiling slices beside it: with
//! the process on every CPU, as the scheduler places it, and with every thread of the process on
//! one CPU (the one where raw commits run fastest). See [`Placement`] for why.
//!
//! Run: `cargo bench -p crdctl-bench --bench server`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

#[path = "../../../examples/crontab-conversion-webhook/convert.rs"]
mod convert;
// The shared load generator; this benchmark uses part of it.
#[allow(dead_code)]
#[path = "common/load.rs"]
mod load;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_server::testing::TestServer;
use crdctl_storage::Store;
use load::{Connection, Load, Peer, Post, RUN_FOR, v1_body};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde_json::{Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LIST_SIZE: usize = 10_000;

/// The bytes the baselines write: a CronTab as the server stores it (`managedFields` and all),
/// read back from a server, as the etcd benchmark's baseline puts a stored object's bytes.
async fn stored_value(peer: &Peer) -> Vec<u8> {
    let (_server, load, store, _dir) = server_with(peer, crd(None)).await;
    let path = "/apis/example.com/v1/namespaces/default/crontabs";
    let (code, _) = load.send(reqwest::Method::POST, path, Some(v1_body("crontab-000000", "v1"))).await;
    assert_eq!(code, 201);
    store.get("/registry/example.com/crontabs/default/crontab-000000").await.unwrap().unwrap().value
}

/// Durable redb transactions, one write each, one after another, into one database that
/// grows as the server's does.
struct RawRedb {
    db: redb::Database,
    value: Vec<u8>,
    _dir: tempfile::TempDir,
    written: u64,
}

impl RawRedb {
    const TABLE: redb::TableDefinition<'static, &'static str, &'static [u8]> = redb::TableDefinition::new("bench");

    fn new(value: Vec<u8>) -> RawRedb {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("raw.redb")).unwrap();
        RawRedb { db, value, _dir: dir, written: 0 }
    }

    /// Commits for `run_for`.
    fn run(&mut self, run_for: Duration) -> Tally {
        let started = Instant::now();
        let mut made = 0;
        while started.elapsed() < run_for {
            let txn = self.db.begin_write().unwrap();
            let key = format!("/k/{}", self.written);
            txn.open_table(Self::TABLE).unwrap().insert(key.as_str(), self.value.as_slice()).unwrap();
            txn.commit().unwrap();
            self.written += 1;
            made += 1;
        }
        Tally { made, took: started.elapsed() }
    }
}

/// Operations and the time they took, summed over slices.
#[derive(Clone, Copy, Default)]
struct Tally {
    made: u64,
    took: Duration,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.made += other.made;
        self.took += other.took;
    }

    fn rate(&self) -> f64 {
        self.made as f64 / self.took.as_secs_f64()
    }
}

/// Where the process's threads run while one client is measured, with the baselines measured
/// there too. On two CPUs, as the scheduler places them, every request and every answer here
/// waits for an idle vCPU to be woken (a Firecracker VM with nested virtualisation), which
/// costs more than the server's work; on one CPU alone the client, the server and the disk's
/// wake-up share it, as they would on a machine where waking another core is cheap.
struct Placement {
    label: String,
    cpus: CpuSet,
    raw: Tally,
    ceiling: Tally,
}

impl Placement {
    fn new(label: String, cpus: CpuSet) -> Placement {
        Placement { label, cpus, raw: Tally::default(), ceiling: Tally::default() }
    }
}

/// Confines every thread of this process to `cpus` (as `taskset -a -p`); threads started later
/// inherit their starter's CPUs.
fn run_on(cpus: &CpuSet) {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let tid: i32 = task.unwrap().file_name().to_str().unwrap().parse().unwrap();
        match sched_setaffinity(Pid::from_raw(tid), cpus) {
            // The thread ended since the listing.
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(error) => panic!("confining thread {tid}: {error}"),
        }
    }
}

/// The CPUs of `all`, one by one.
fn each_cpu(all: &CpuSet) -> impl Iterator<Item = usize> + '_ {
    (0..CpuSet::count()).filter(|&cpu| all.is_set(cpu).unwrap())
}

/// The CPU on which raw commits run fastest (here, the one that takes the disk's interrupts):
/// the one-CPU rows run there, so their baseline is the strictest.
fn fastest_cpu(raw: &mut RawRedb, all: &CpuSet) -> usize {
    let mut rates = Vec::new();
    for cpu in each_cpu(all) {
        run_on(&only(cpu));
        rates.push((raw.run(RUN_FOR / 4).rate(), cpu));
    }
    run_on(all);
    rates.into_iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap().1
}

fn only(cpu: usize) -> CpuSet {
    let mut set = CpuSet::new();
    set.set(cpu).unwrap();
    set
}

/// The least an HTTP server can do per durable create: an endpoint on the same HTTP stack and
/// runtime as the server that commits the body to raw redb (one transaction, as [`RawRedb`])
/// and echoes it. What one client gets from it is the ceiling the HTTP round trip leaves.
async fn floor_server() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(redb::Database::create(dir.path().join("floor.redb")).unwrap());
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let commit = move |body: bytes::Bytes| {
        let (db, written) = (Arc::clone(&db), Arc::clone(&written));
        async move {
            let n = written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let txn = db.begin_write().unwrap();
            txn.open_table(RawRedb::TABLE).unwrap().insert(format!("/k/{n}").as_str(), body.as_ref()).unwrap();
            txn.commit().unwrap();
            (axum::http::StatusCode::CREATED, body)
        }
    };
    let app = axum::Router::new().route("/commit", axum::routing::post(commit));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let server = axum_server::from_tcp(listener).unwrap().acceptor(axum_server::accept::NoDelayAcceptor::new());
    tokio::spawn(server.serve(app.into_make_service()));
    (format!("http://{address}"), dir)
}

/// Creates through the store engine from `writers` concurrent tasks.
async fn store_writes(writers: usize, value: Vec<u8>) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
    load::rate(writers, move |writer, i| {
        let (store, value) = (Arc::clone(&store), value.clone());
        async move {
            store.create(&format!("/k/{writer}/{i}"), value).await.unwrap();
        }
    })
    .await
}

fn crd(webhook: Option<(u16, String)>) -> Value {
    let schema_v1 = json!({"openAPIV3Schema": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "string"}}}});
    let schema_v1beta1 = match &webhook {
        Some(_) => json!({"openAPIV3Schema": {"type": "object", "properties": {"hostPort": {"type": "string"}}}}),
        None => schema_v1.clone(),
    };
    let conversion = match webhook {
        Some((port, ca_bundle)) => json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://localhost:{port}/crdconvert"), "caBundle": ca_bundle}}}),
        None => json!({"strategy": "None"}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "crontabs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"}, "conversion": conversion,
            "versions": [{"name": "v1beta1", "served": true, "storage": false, "schema": schema_v1beta1},
                         {"name": "v1", "served": true, "storage": true, "schema": schema_v1}]}})
}

fn v1beta1_body(name: &str, version: &str) -> String {
    format!(
        r#"{{"apiVersion":"example.com/{version}","kind":"CronTab","metadata":{{"name":"{name}"}},"hostPort":"localhost:1234"}}"#
    )
}

/// The server on `peer` over a fresh redb store, with `crd` created.
async fn server_with(peer: &Peer, crd: Value) -> (TestServer, Arc<Load>, Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
    let server = peer.run(TestServer::start_with(crdctl_server::Config::default(), Arc::clone(&store))).await.unwrap();
    let load = Arc::new(Load::new(vec![server.url()]));
    let (code, body) = load
        .send(reqwest::Method::POST, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Some(crd.to_string()))
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    (server, load, store, dir)
}

/// One line of the report: what, how many per second, and its ratios.
fn row(what: &str, rate: f64, ratios: String) {
    println!("{}", format!("  {what:<46}{rate:>10.0}   {ratios}").trim_end());
}

fn ratio(rate: f64, baseline: f64) -> String {
    format!("{:.0}%", rate / baseline * 100.0)
}

/// The one-client creates are measured in this many slices, each after a slice of raw commits,
/// so that the machine's drift (fsync times here vary by a third from one minute to the next)
/// weighs on the rate and its baseline alike.
const SLICES: u32 = 4;

// The load generator runs here; the server has a runtime of two workers (as `crdctl serve` on
// two cores) and the webhook one of one (see `Peer`).
#[tokio::main(flavor = "current_thread")]
async fn main() {
    // The webhook for the conversion runs: HTTPS on loopback, the CronTab converter.
    let names = vec!["localhost".to_string()];
    let bundle = crdctl_conversion::certs::generate(&names).unwrap();
    let certs = tempfile::tempdir().unwrap();
    std::fs::write(certs.path().join("tls.crt"), &bundle.cert_pem).unwrap();
    std::fs::write(certs.path().join("tls.key"), &bundle.key_pem).unwrap();
    let options = crdctl_conversion::framework::Options::new(
        "127.0.0.1:0".parse().unwrap(),
        certs.path().join("tls.crt"),
        certs.path().join("tls.key"),
    );
    let webhook_peer = Peer::new(1);
    let webhook =
        webhook_peer.run(crdctl_conversion::framework::start(options, convert::convert_crontab)).await.unwrap();
    let server_peer = Peer::new(2);
    let value = stored_value(&server_peer).await;
    let mut raw = RawRedb::new(value.clone());
    let (floor_url, _floor_dir) = server_peer.run(floor_server()).await;
    let mut floor = Connection::open(&floor_url).await;
    let floor_body = String::from_utf8(value.clone()).unwrap();
    // On the server's runtime, as the server writes: a lone writer commits in place there.
    let store_1 = server_peer.run(store_writes(1, value.clone())).await;
    let store_16 = server_peer.run(store_writes(16, value.clone())).await;
    let all = sched_getaffinity(Pid::from_raw(0)).unwrap();
    let alone = fastest_cpu(&mut raw, &all);
    let mut placements = [
        Placement::new(format!("{} CPUs", each_cpu(&all).count()), all),
        Placement::new(format!("CPU {alone} alone"), only(alone)),
    ];

    let mut blocks = Vec::new();
    for (label, webhook) in [("None", None), ("Webhook", Some((webhook.address.port(), bundle.ca_bundle())))] {
        let converting = webhook.is_some();
        let (_server, load, _store, _dir) = server_with(&server_peer, crd(webhook)).await;
        // Writes at v1beta1 are converted to the storage version v1 (by the webhook when set).
        let post = Post::crontabs("v1beta1", if converting { v1beta1_body } else { v1_body });
        let mut creates_1 = vec![Tally::default(); placements.len()];
        // ConfigMaps, a built-in kind, in the same slices (the conversion None block only).
        let mut config_maps_1 = vec![Tally::default(); placements.len()];
        for slice in 0..SLICES {
            for (at, (placement, creates)) in placements.iter_mut().zip(&mut creates_1).enumerate() {
                run_on(&placement.cpus);
                placement.raw.add(raw.run(RUN_FOR / SLICES));
                let started = Instant::now();
                let mut made = 0;
                while started.elapsed() < RUN_FOR / SLICES {
                    let (code, _) = floor.send(reqwest::Method::POST, "/commit", Some(floor_body.clone())).await;
                    assert_eq!(code, 201);
                    made += 1;
                }
                placement.ceiling.add(Tally { made, took: started.elapsed() });
                let (prefix, started) = (format!("one{slice}-{at}"), Instant::now());
                let (_, made) = load.creates_for(RUN_FOR / SLICES, post, 1, None, &prefix).await;
                creates.add(Tally { made: made as u64, took: started.elapsed() });
                if !converting && let Some(config_maps) = config_maps_1.get_mut(at) {
                    let started = Instant::now();
                    let (_, made) = load.creates_for(RUN_FOR / SLICES, Post::config_maps(), 1, None, &prefix).await;
                    config_maps.add(Tally { made: made as u64, took: started.elapsed() });
                }
            }
        }
        run_on(&all);
        let made_1 = creates_1.iter().map(|tally| tally.made as usize).sum::<usize>();
        // Measured for RUN_FOR like the others (a count left over by the one-client slices can
        // be a few hundred, too few to measure 16 clients by), then topped up to the list's size.
        let (creates_16, made_16) = load.creates(post, 16, None, "many").await;
        let (_, topped_up) = load.creates(post, 16, Some(LIST_SIZE.saturating_sub(made_1 + made_16)), "more").await;
        let total = made_1 + made_16 + topped_up;
        let listed = load.list("v1", "", total).await;
        let listed_converted = load.list("v1beta1", "", total).await;
        let page: Value = serde_json::from_slice(
            &load.send(reqwest::Method::GET, "/apis/example.com/v1/namespaces/default/crontabs?limit=64", None).await.1,
        )
        .unwrap();
        let sample: Vec<String> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        let sample = Arc::new(sample);
        let mut gets_1 = Vec::new();
        for placement in &placements {
            run_on(&placement.cpus);
            gets_1.push(load.gets(Arc::clone(&sample), 1).await);
        }
        run_on(&all);
        let gets_16 = load.gets(sample, 16).await;
        blocks.push(Block {
            label,
            creates_1,
            config_maps_1,
            creates_16,
            gets_1,
            gets_16,
            total,
            listed,
            listed_converted,
        });
    }

    report(value.len(), &placements, (store_1, store_16), blocks).finish();
}

/// One conversion strategy's measurements.
struct Block {
    label: &'static str,
    creates_1: Vec<Tally>,
    config_maps_1: Vec<Tally>,
    creates_16: f64,
    gets_1: Vec<f64>,
    gets_16: f64,
    total: usize,
    listed: Duration,
    listed_converted: Duration,
}

/// Prints each rate beside its baseline of the same run, and holds the one-CPU placement's
/// one-client rates to their targets.
fn report(
    value_len: usize,
    placements: &[Placement],
    (store_1, store_16): (f64, f64),
    blocks: Vec<Block>,
) -> targets::Targets {
    let mut targets = targets::Targets::default();
    println!("{:<48}{:>10}   ÷ raw there", format!("baseline (durable, redb, {value_len} bytes)"), "writes/s");
    for placement in placements {
        let (raw, ceiling) = (placement.raw.rate(), placement.ceiling.rate());
        row(&format!("raw redb, 1 writer, {}", placement.label), raw, "100%".into());
        row(&format!("HTTP + raw redb commit, 1 client, {}", placement.label), ceiling, ratio(ceiling, raw));
    }
    let raw = placements[0].raw.rate();
    row("store engine, 1 writer", store_1, ratio(store_1, raw));
    row("store engine, 16 writers", store_16, ratio(store_16, raw));
    for Block { label, creates_1, config_maps_1, creates_16, gets_1, gets_16, total, listed, listed_converted } in
        blocks
    {
        println!("{:<48}{:>10}   ÷ raw there", format!("server, conversion {label}"), "per second");
        for ((placement, creates), config_maps) in placements.iter().zip(creates_1).zip(config_maps_1) {
            let creates = creates.rate();
            let ratios = format!(
                "{}   ({} of HTTP + raw commit)",
                ratio(creates, placement.raw.rate()),
                ratio(creates, placement.ceiling.rate())
            );
            row(&format!("creates, 1 client, {}", placement.label), creates, ratios);
            let alone = placement.label.ends_with("alone");
            let of_raw = creates / placement.raw.rate();
            targets.expect(
                !alone || of_raw >= 0.5,
                format!(
                    "{label}: 1-client creates {:.0}% of raw commits on {} (≥ 50%)",
                    of_raw * 100.0,
                    placement.label
                ),
            );
            if config_maps.made > 0 {
                let config_maps = config_maps.rate();
                let ratios = format!(
                    "{}   ({} of CronTab creates)",
                    ratio(config_maps, placement.raw.rate()),
                    ratio(config_maps, creates)
                );
                row(&format!("ConfigMap creates, 1 client, {}", placement.label), config_maps, ratios);
                targets.expect(
                    config_maps / creates >= 0.9,
                    format!(
                        "{label}: ConfigMap creates {:.0}% of CronTab creates on {} (≥ 90%)",
                        config_maps / creates * 100.0,
                        placement.label
                    ),
                );
            }
        }
        row("creates, 16 clients", creates_16, ratio(creates_16, raw));
        for (placement, gets) in placements.iter().zip(gets_1) {
            row(&format!("gets, 1 client, {}", placement.label), gets, String::new());
        }
        row("gets, 16 clients", gets_16, String::new());
        println!("  {:<46}{:>7.1} ms", format!("list {total} at the storage version"), listed.as_secs_f64() * 1e3);
        println!(
            "  {:<46}{:>7.1} ms",
            format!("list {total} at v1beta1 (converted)"),
            listed_converted.as_secs_f64() * 1e3
        );
    }
    targets
}
