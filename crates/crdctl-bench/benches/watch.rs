//! Watch at scale on `crdctl serve`'s embedded redb store: 1,000 watchers on one resource and
//! 100 on another while writers create and then patch objects of both, and on a third resource
//! of large objects 10 watchers that read and 10 whose clients never do.
//!
//! Reported, per group of watchers: events delivered ÷ (writes × watchers) (target ≥ 0.99:
//! every event once, in `resourceVersion` order, counted only if in order), and the delivery
//! latency from the start of the write's request to the watcher's parsed line (p50, p99, max).
//! Baselines from the same run: the same writes with no watcher (the writers' own rate), and the
//! process's resident memory before any watcher connected; memory per watcher is the growth with
//! every watcher connected, then after all events were delivered, over the number of watchers —
//! server and client sides of each connection together, so an upper bound on the server's
//! share. The stalled watchers show what one that stops reading costs: more than the
//! connection's buffers is written to them, and the server closes them after
//! `watch_stall_timeout` instead of buffering for them, while the readers of the same resource
//! get every event.
//!
//! Then how delivery grows with the watchers: 1, 10, 100 and 1,000 watchers of a resource of
//! their own while the same writes are made to it, beside those writes with none (the
//! baseline); each row with the writes' rate against the baseline's, the events delivered per
//! second (writes/s × watchers), the share delivered and the latency.
//!
//! Run: `cargo bench -p crdctl-bench --bench watch`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its report")]

#[path = "common/targets.rs"]
mod targets;

#[path = "common/load.rs"]
#[allow(dead_code, reason = "this benchmark drives connections of its own, not the load generator's loops")]
mod load;

#[path = "common/memory.rs"]
#[allow(dead_code, reason = "only the resident memory is read here, not the peak")]
mod memory;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crdctl_server::testing::TestServer;
use http_body_util::BodyExt;
use load::{Connection, Peer};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Watchers of the busy resource, of the quiet one, and that never read.
const HOT_WATCHERS: usize = 1_000;
const COLD_WATCHERS: usize = 100;
const STALLED_WATCHERS: usize = 10;
/// Objects of each resource, each created and then patched once.
const HOT_OBJECTS: usize = 500;
const COLD_OBJECTS: usize = 100;
/// Objects of 64 KiB: 20 MiB, more than a connection nobody reads buffers.
const LARGE_OBJECTS: usize = 160;
const LARGE_SIZE: usize = 64 * 1024;
const LARGE_READERS: usize = 10;
/// Concurrent writers.
const WRITERS: usize = 4;
/// Watchers of each step of the scale table (the first, none, is its baseline), and the
/// objects each step creates and patches.
const SCALE_STEPS: [usize; 5] = [0, 1, 10, 100, 1_000];
const SCALE_OBJECTS: usize = 100;
/// The time every event may take to arrive.
const DEADLINE: Duration = Duration::from_secs(300);

fn crd(plural: &str, kind: &str) -> String {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
    .to_string()
}

fn collection(plural: &str) -> String {
    format!("/apis/example.com/v1/namespaces/default/{plural}")
}

/// What one watcher saw: events in order, and the latency of each in microseconds.
#[derive(Default)]
struct Seen {
    in_order: usize,
    out_of_order: usize,
    latencies: Vec<u64>,
}

#[derive(serde::Deserialize)]
struct Line {
    object: Object,
}

#[derive(serde::Deserialize)]
struct Object {
    metadata: Metadata,
    spec: Spec,
}

#[derive(serde::Deserialize)]
struct Metadata {
    #[serde(rename = "resourceVersion")]
    resource_version: String,
}

#[derive(serde::Deserialize)]
struct Spec {
    /// Microseconds from the benchmark's start to the start of the write.
    sent: u64,
}

/// Watches `path` from `rv` until `want` events came (or the deadline).
async fn watcher(base: String, path: String, rv: String, want: usize, start: Instant) -> Seen {
    let mut connection = Connection::open(&base).await;
    let url = format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds=600");
    let mut body = connection.request(reqwest::Method::GET, &url, None).await.into_body();
    let mut seen = Seen { latencies: Vec::with_capacity(want), ..Seen::default() };
    let (mut pending, mut last) = (Vec::new(), 0u64);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while seen.in_order + seen.out_of_order < want {
        let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await else { break };
        let Ok(data) = frame.into_data() else { continue };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Line = serde_json::from_slice(&pending[..end]).unwrap();
            pending.drain(..=end);
            let received = start.elapsed().as_micros() as u64;
            let rv: u64 = line.object.metadata.resource_version.parse().unwrap();
            if rv > last {
                seen.in_order += 1;
            } else {
                seen.out_of_order += 1;
            }
            last = rv;
            seen.latencies.push(received.saturating_sub(line.object.spec.sent));
        }
    }
    seen
}

/// Creates then patches `objects` objects of `plural` from `WRITERS` connections, each
/// write stamped with the time its request started.
async fn write(base: &str, plural: &str, kind: &str, objects: usize, size: usize, start: Instant) {
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (base, plural, kind) = (base.to_string(), plural.to_string(), kind.to_string());
            tokio::spawn(async move {
                let mut connection = Connection::open(&base).await;
                let path = collection(&plural);
                for i in (writer..objects).step_by(WRITERS) {
                    let sent = start.elapsed().as_micros();
                    let body = json!({"apiVersion": "example.com/v1", "kind": kind,
                        "metadata": {"name": format!("{plural}-{i:05}")}, "spec": {"sent": sent, "data": "x".repeat(size)}});
                    let (code, _) = connection.send(reqwest::Method::POST, &path, Some(body.to_string())).await;
                    assert_eq!(code, 201);
                }
                for i in (writer..objects).step_by(WRITERS) {
                    let sent = start.elapsed().as_micros();
                    let patch = json!({"spec": {"sent": sent}}).to_string();
                    let object = format!("{path}/{plural}-{i:05}");
                    let response = connection
                        .request(reqwest::Method::PATCH, &object, Some(("application/merge-patch+json", patch.into())))
                        .await;
                    assert_eq!(response.status().as_u16(), 200);
                    response.into_body().collect().await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or(0) as f64 / 1000.0
}

/// What a group of watchers was delivered: the share of every event to every watcher, those
/// out of order, and the latency's p50, p99 and maximum in milliseconds.
struct Delivery {
    share: f64,
    out_of_order: usize,
    latency: [f64; 3],
}

impl Delivery {
    fn of(writes: usize, seen: &[Seen]) -> Delivery {
        let delivered: usize = seen.iter().map(|s| s.in_order).sum();
        let mut latencies: Vec<u64> = seen.iter().flat_map(|s| s.latencies.iter().copied()).collect();
        latencies.sort_unstable();
        Delivery {
            share: delivered as f64 / (writes * seen.len()).max(1) as f64,
            out_of_order: seen.iter().map(|s| s.out_of_order).sum(),
            latency: [0.50, 0.99, 1.0].map(|p| percentile(&latencies, p)),
        }
    }

    /// Holds the group to every event delivered, in order.
    fn expect(&self, group: &str, targets: &mut targets::Targets) {
        let share = self.share;
        targets.expect(share >= 0.99, format!("{group}: {share:.4} of events delivered (≥ 0.99)"));
    }
}

fn report(group: &str, watchers: usize, writes: usize, seen: &[Seen], targets: &mut targets::Targets) {
    let delivery = Delivery::of(writes, seen);
    let [p50, p99, max] = delivery.latency;
    println!(
        "  {group:<34}{watchers:>6} watchers × {writes:>5} writes   delivered {:.4}   out of order {}   latency p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
        delivery.share, delivery.out_of_order,
    );
    delivery.expect(group, targets);
}

/// One step of the scale table: `watchers` watchers of a resource of their own while its
/// objects are created and patched; the writes' rate and what was delivered.
async fn scale_step(base: &str, watchers: usize, start: Instant) -> (f64, Delivery) {
    let (plural, kind) = (format!("scale{watchers}s"), format!("Scale{watchers}"));
    let mut setup = Connection::open(base).await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (code, _) = setup.send(reqwest::Method::POST, crds, Some(crd(&plural, &kind))).await;
    assert_eq!(code, 201);
    let (_, list) = setup.send(reqwest::Method::GET, &collection(&plural), None).await;
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let group: Vec<_> = (0..watchers)
        .map(|_| tokio::spawn(watcher(base.to_string(), collection(&plural), rv.clone(), 2 * SCALE_OBJECTS, start)))
        .collect();
    if watchers > 0 {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let began = Instant::now();
    write(base, &plural, &kind, SCALE_OBJECTS, 1024, start).await;
    let rate = (2 * SCALE_OBJECTS) as f64 / began.elapsed().as_secs_f64();
    (rate, Delivery::of(2 * SCALE_OBJECTS, &all_seen(group).await))
}

/// The scale table: each step beside the first's writes (nobody watching).
async fn scale_table(base: &str, start: Instant, targets: &mut targets::Targets) {
    println!("watchers of one resource, 1 KiB objects, {SCALE_OBJECTS} created then patched from {WRITERS} writers");
    println!("  watchers   writes/s   ÷ unwatched   events/s   delivered   latency p50 / p99 / max");
    let mut unwatched = 0.0;
    for watchers in SCALE_STEPS {
        let (rate, delivery) = scale_step(base, watchers, start).await;
        if watchers == 0 {
            unwatched = rate;
            println!("  {watchers:>8}   {rate:>8.0}   baseline");
            continue;
        }
        let [p50, p99, max] = delivery.latency;
        println!(
            "  {watchers:>8}   {rate:>8.0}   {:>11.2}   {:>8.0}   {:>9.4}   {p50:>5.1} / {p99:>5.1} / {max:>5.1} ms",
            rate / unwatched,
            rate * watchers as f64,
            delivery.share
        );
        delivery.expect(&format!("{watchers} watchers of one resource"), targets);
    }
}

/// What each watcher of a group saw, once all are done.
async fn all_seen(watchers: Vec<tokio::task::JoinHandle<Seen>>) -> Vec<Seen> {
    let mut seen = Vec::with_capacity(watchers.len());
    for watcher in watchers {
        seen.push(watcher.await.unwrap());
    }
    seen
}

#[tokio::main]
async fn main() {
    let peer = Peer::new(2);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn crdctl_storage::Store> = Arc::new(crdctl_storage::redb::open(dir.path()).unwrap());
    let server = peer.run(TestServer::start_with(crdctl_server::Config::default(), store)).await.unwrap();
    let base = server.url();
    let mut setup = Connection::open(&base).await;
    for (plural, kind) in [("crontabs", "CronTab"), ("widgets", "Widget"), ("blobs", "Blob"), ("warmups", "Warmup")] {
        let (code, _) = setup
            .send(
                reqwest::Method::POST,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                Some(crd(plural, kind)),
            )
            .await;
        assert_eq!(code, 201);
    }
    let start = Instant::now();

    // Baseline: the same writes with nobody watching.
    let began = Instant::now();
    write(&base, "warmups", "Warmup", HOT_OBJECTS, 1024, start).await;
    let unwatched = (2 * HOT_OBJECTS) as f64 / began.elapsed().as_secs_f64();

    let (_, list) = setup.send(reqwest::Method::GET, &collection("crontabs"), None).await;
    let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let before_kib = memory::resident_kib("self");

    let spawn_group = |plural: &str, count: usize, objects: usize| -> Vec<tokio::task::JoinHandle<Seen>> {
        (0..count)
            .map(|_| tokio::spawn(watcher(base.clone(), collection(plural), rv.clone(), 2 * objects, start)))
            .collect()
    };
    let hot = spawn_group("crontabs", HOT_WATCHERS, HOT_OBJECTS);
    let cold = spawn_group("widgets", COLD_WATCHERS, COLD_OBJECTS);
    let large = spawn_group("blobs", LARGE_READERS, LARGE_OBJECTS);
    let mut stalled = Vec::new();
    for _ in 0..STALLED_WATCHERS {
        let mut connection = Connection::open(&base).await;
        let path = format!("{}?watch=true&resourceVersion={rv}", collection("blobs"));
        stalled.push((connection.request(reqwest::Method::GET, &path, None).await.into_body(), connection));
    }
    // Every watcher is registered once a request after them is answered on each connection.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let watching_kib = memory::resident_kib("self");

    let began = Instant::now();
    let small_writes = async {
        tokio::join!(
            write(&base, "crontabs", "CronTab", HOT_OBJECTS, 1024, start),
            write(&base, "widgets", "Widget", COLD_OBJECTS, 1024, start),
        );
        began.elapsed()
    };
    let (small_writes_took, ()) =
        tokio::join!(small_writes, write(&base, "blobs", "Blob", LARGE_OBJECTS, LARGE_SIZE, start));
    let watched = (2 * (HOT_OBJECTS + COLD_OBJECTS)) as f64 / small_writes_took.as_secs_f64();
    let (hot_seen, cold_seen, large_seen) = (all_seen(hot).await, all_seen(cold).await, all_seen(large).await);
    let delivered_in = began.elapsed();
    let after_kib = memory::resident_kib("self");

    // A stalled watcher, read at last: it was closed, so its stream ends short of every event.
    let mut closed = 0;
    for (mut body, _connection) in stalled {
        let mut lines = 0;
        loop {
            match tokio::time::timeout(Duration::from_secs(10), body.frame()).await {
                Ok(Some(Ok(frame))) => {
                    lines += frame.into_data().map(|d| d.iter().filter(|b| **b == b'\n').count()).unwrap_or(0)
                }
                Ok(_) => {
                    closed += usize::from(lines < 2 * LARGE_OBJECTS);
                    break;
                }
                Err(_) => break,
            }
        }
    }

    let watchers = HOT_WATCHERS + COLD_WATCHERS + LARGE_READERS + STALLED_WATCHERS;
    println!("watch at scale (redb store, {} CPUs)", std::thread::available_parallelism().map_or(0, |n| n.get()));
    let mut targets = targets::Targets::default();
    report("busy resource", HOT_WATCHERS, 2 * HOT_OBJECTS, &hot_seen, &mut targets);
    report("quiet resource", COLD_WATCHERS, 2 * COLD_OBJECTS, &cold_seen, &mut targets);
    report("64 KiB objects, beside stalled", LARGE_READERS, 2 * LARGE_OBJECTS, &large_seen, &mut targets);
    println!(
        "  writes/s of 1 KiB objects: {watched:.0} watched ÷ {unwatched:.0} unwatched (same run) = {:.2}; every event delivered {:.1} s after the writes began",
        watched / unwatched,
        delivered_in.as_secs_f64()
    );
    println!(
        "  stalled watchers closed by the server: {closed} of {STALLED_WATCHERS} (watch_stall_timeout {:?})",
        crdctl_server::Config::default().watch_stall_timeout
    );
    println!(
        "  RSS: {} MiB before, {} MiB with {watchers} watchers connected, {} MiB after delivery: {:.1} KiB per watcher connected, {:.1} KiB after",
        before_kib / 1024,
        watching_kib / 1024,
        after_kib / 1024,
        watching_kib.saturating_sub(before_kib) as f64 / watchers as f64,
        after_kib.saturating_sub(before_kib) as f64 / watchers as f64,
    );
    scale_table(&base, start, &mut targets).await;
    drop(server);
    targets.finish();
}
