//! The built-in API's costs: the wire formats and the start-up.
//!
//! Wire formats: ConfigMap creates and gets with one client, in JSON and in Kubernetes protobuf
//! (what client-go and Helm send), in alternating slices on one in-memory server, so the store
//! costs the same for both and the difference is the codec. Target: protobuf ≥ the JSON rate.
//!
//! Strategic merge patch: one container's image changed in a 10-container Deployment, as
//! `kubectl apply` sends it (the container by its merge key, with `$setElementOrder`), against
//! a merge patch making the same change (which must carry the whole container list), in
//! alternating slices. Target: within 2× the merge patch's time.
//!
//! Start-up: `TestServer` start (median of 21, on the in-memory store; target < 20 ms), then
//! what the built-in API adds once every kind of it has been written: the time and resident
//! memory to compile every built-in kind's schema from the vendored OpenAPI documents, against
//! the process's memory with the server started (target: within +30 MiB; a server pays only for
//! the kinds it is sent).
//!
//! Run: `cargo bench -p crdctl-bench --bench wire`.

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
use load::{Connection, Peer};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CONFIG_MAPS: &str = "/api/v1/namespaces/default/configmaps";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const SLICE: Duration = Duration::from_millis(500);
const SLICES: usize = 8;

/// A ConfigMap in each wire format.
fn bodies(name: &str) -> [(&'static str, bytes::Bytes); 2] {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": "web"}},
        "data": {"host": "localhost", "port": "1234", "mode": "fast"}});
    let protobuf = crdctl_server::protobuf::encode(&object).unwrap();
    [("application/json", object.to_string().into()), (PROTOBUF, protobuf.into())]
}

/// Operations per second of `operation` over `SLICE`.
async fn slice<F: AsyncFnMut(usize)>(mut operation: F) -> (usize, Duration) {
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < SLICE {
        operation(n).await;
        n += 1;
    }
    (n, started.elapsed())
}

fn rate(total: (usize, Duration)) -> f64 {
    total.0 as f64 / total.1.as_secs_f64()
}

fn add(total: &mut (usize, Duration), part: (usize, Duration)) {
    total.0 += part.0;
    total.1 += part.1;
}

async fn wire_formats(base: &str) -> [[(usize, Duration); 2]; 2] {
    let mut connection = Connection::open(base).await;
    let mut creates = [(0, Duration::ZERO); 2];
    let mut gets = [(0, Duration::ZERO); 2];
    for round in 0..SLICES {
        for (format, total) in creates.iter_mut().enumerate() {
            let part = slice(async |n| {
                let [json, protobuf] = bodies(&format!("cm-{round}-{format}-{n}"));
                let body = if format == 0 { json } else { protobuf };
                let response = connection.request(reqwest::Method::POST, CONFIG_MAPS, Some(body)).await;
                assert_eq!(response.status(), 201);
                http_body_util::BodyExt::collect(response.into_body()).await.unwrap();
            })
            .await;
            add(total, part);
        }
    }
    for _ in 0..SLICES {
        for (format, total) in gets.iter_mut().enumerate() {
            let accept =
                if format == 0 { "application/json" } else { "application/vnd.kubernetes.protobuf, application/json" };
            let part = slice(async |n| {
                let path = format!("{CONFIG_MAPS}/cm-{}-0-0", n % SLICES);
                let response = connection.request_accepting(reqwest::Method::GET, &path, None, accept).await;
                assert_eq!(response.status(), 200);
                let content_type = response.headers()["Content-Type"].to_str().unwrap().to_string();
                assert_eq!(content_type, if format == 0 { "application/json" } else { PROTOBUF });
                http_body_util::BodyExt::collect(response.into_body()).await.unwrap();
            })
            .await;
            add(total, part);
        }
    }
    [creates, gets]
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const CONTAINERS: usize = 10;

fn container(index: usize, image: &str) -> serde_json::Value {
    json!({"name": format!("c{index}"), "image": image, "ports": [{"containerPort": 8000 + index}],
        "env": [{"name": "INDEX", "value": index.to_string()}, {"name": "MODE", "value": "fast"}]})
}

/// The same change in each patch type: container `c3`'s image becomes `image`.
fn patches(image: &str) -> [(&'static str, bytes::Bytes); 2] {
    let strategic = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": (0..CONTAINERS).map(|i| json!({"name": format!("c{i}")})).collect::<Vec<_>>(),
        "containers": [{"name": "c3", "image": image}]}}}});
    let containers: Vec<_> = (0..CONTAINERS).map(|i| container(i, if i == 3 { image } else { "app:1" })).collect();
    let merge = json!({"spec": {"template": {"spec": {"containers": containers}}}});
    [
        ("application/merge-patch+json", merge.to_string().into()),
        ("application/strategic-merge-patch+json", strategic.to_string().into()),
    ]
}

/// Patches of the 10-container Deployment `web`: merge patch, then strategic merge patch.
async fn patch_types(base: &str) -> [(usize, Duration); 2] {
    let mut connection = Connection::open(base).await;
    let containers: Vec<_> = (0..CONTAINERS).map(|i| container(i, "app:1")).collect();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}}});
    let created = connection
        .request(reqwest::Method::POST, DEPLOYMENTS, Some(("application/json", deployment.to_string().into())))
        .await;
    assert_eq!(created.status(), 201);
    http_body_util::BodyExt::collect(created.into_body()).await.unwrap();
    let mut totals = [(0, Duration::ZERO); 2];
    for _ in 0..SLICES {
        for (kind, total) in totals.iter_mut().enumerate() {
            let part = slice(async |n| {
                let [merge, strategic] = patches(&format!("app:{}", n % 2 + 2));
                let body = if kind == 0 { merge } else { strategic };
                let response =
                    connection.request(reqwest::Method::PATCH, &format!("{DEPLOYMENTS}/web"), Some(body)).await;
                assert_eq!(response.status(), 200);
                http_body_util::BodyExt::collect(response.into_body()).await.unwrap();
            })
            .await;
            add(total, part);
        }
    }
    totals
}

#[tokio::main]
async fn main() {
    let peer = Peer::new(2);
    let mut starts = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        let store = Arc::new(crdctl_storage::memory::open());
        let server = peer.run(TestServer::start_with(crdctl_server::Config::default(), store)).await.unwrap();
        starts.push(started.elapsed());
        drop(server);
    }
    starts.sort();

    let server = peer.run(TestServer::start()).await.unwrap();
    let base = server.url();
    let mut connection = Connection::open(&base).await;
    assert_eq!(connection.send(reqwest::Method::GET, "/healthz", None).await.0, 200);
    // What an operator's objects use (the kinds of a typical chart), then every kind.
    let operator =
        ["configmaps", "secrets", "serviceaccounts", "leases", "roles", "rolebindings", "deployments", "services"];
    let rows = &crdctl_server::registry::builtin::RESOURCES;
    let compile = |which: &dyn Fn(&str) -> bool| {
        let before = memory::resident_kib("self");
        let started = Instant::now();
        let kinds = rows.iter().filter(|row| which(row.resource)).filter(|row| row.schema().is_some()).count();
        (kinds, started.elapsed(), memory::resident_kib("self").saturating_sub(before))
    };
    let started_kib = memory::resident_kib("self");
    let first = compile(&|resource| resource == "configmaps");
    let typical = compile(&|resource| operator.contains(&resource));
    let all = compile(&|_| true);
    let [creates, gets] = wire_formats(&base).await;
    let patched = patch_types(&base).await;
    println!("## Built-in API: wire formats and start-up\n");
    println!("| measure | value | against the same run's baseline |");
    println!("|---|---|---|");
    let ratio = |pair: [(usize, Duration); 2]| rate(pair[1]) / rate(pair[0]);
    println!("| ConfigMap creates, JSON, 1 client | {:.0}/s | baseline |", rate(creates[0]));
    println!(
        "| ConfigMap creates, protobuf, 1 client | {:.0}/s | {:.2}× JSON (target ≥ 1) |",
        rate(creates[1]),
        ratio(creates)
    );
    println!("| ConfigMap gets, JSON, 1 client | {:.0}/s | baseline |", rate(gets[0]));
    println!("| ConfigMap gets, protobuf, 1 client | {:.0}/s | {:.2}× JSON (target ≥ 1) |", rate(gets[1]), ratio(gets));
    println!(
        "| 10-container Deployment, one image changed by merge patch, 1 client | {:.0}/s | baseline |",
        rate(patched[0])
    );
    println!(
        "| the same change by strategic merge patch, 1 client | {:.0}/s | {:.2}× the merge patch's time (target ≤ 2) |",
        rate(patched[1]),
        rate(patched[0]) / rate(patched[1])
    );
    println!(
        "| `TestServer` start, in-memory store (median of 21) | {:.1} ms | target < 20 ms |",
        starts[10].as_secs_f64() * 1e3
    );
    let mut targets = targets::Targets::default();
    targets.expect(ratio(creates) >= 1.0, format!("protobuf creates {:.2}× JSON's (≥ 1)", ratio(creates)));
    targets.expect(ratio(gets) >= 1.0, format!("protobuf gets {:.2}× JSON's (≥ 1)", ratio(gets)));
    let strategic = rate(patched[0]) / rate(patched[1]);
    targets.expect(strategic <= 2.0, format!("strategic merge patch {strategic:.2}× a merge patch's time (≤ 2)"));
    let start = starts[10].as_secs_f64() * 1e3;
    targets.expect(start < 20.0, format!("`TestServer` start {start:.1} ms (< 20 ms)"));
    let operator_mib = (first.2 + typical.2) as f64 / 1024.0;
    targets.expect(operator_mib <= 30.0, format!("an operator's kinds' schemas +{operator_mib:.1} MiB (≤ +30 MiB)"));
    for ((kinds, took, kib), what) in [
        (first, "the first kind written (ConfigMap), with what every schema compile loads once"),
        (
            typical,
            "the rest of an operator's kinds (Secret, ServiceAccount, Lease, Role, RoleBinding, Deployment, Service)",
        ),
        (all, "every other built-in kind"),
    ] {
        println!(
            "| compiling the schemas of {what}: {kinds} kinds written by then | {:.0} ms, +{:.1} MiB | {:.1} MiB resident with the server started (target +30 MiB) |",
            took.as_secs_f64() * 1e3,
            kib as f64 / 1024.0,
            started_kib as f64 / 1024.0
        );
    }
    targets.finish();
}
