//! What a validating admission webhook costs a create, against the HTTPS round trip to that
//! webhook measured in the same run.
//!
//! The server (in-process, in-memory store, so that the webhook's share is not hidden behind
//! fsync) and a webhook on crdctl's framework (HTTPS, certificates made here, answering every
//! review `allowed`) each run on a runtime of their own, as two processes would; one client
//! creates ConfigMaps over one connection. In alternating slices:
//!
//! - creates/s with no webhook configured;
//! - HTTPS round trips/s to the webhook itself: one client on the server's runtime POSTing the
//!   `AdmissionReview` the server sent it first, byte for byte, and reading the answer, over one
//!   kept-alive connection (the floor of any call);
//! - creates/s with one `ValidatingWebhookConfiguration` matching every ConfigMap create.
//!
//! Reported: the ratio of the two create rates, and the overhead per webhook call (the
//! difference of the two create times) against the round trip. Target: overhead ≤ one
//! round trip + 10%. Then, in slices of their own, creates under ten bound
//! `ValidatingAdmissionPolicy`s (each passing) against creates under none; target ≥ 0.9×.
//! Exits 1 when a target is missed.
//!
//! Run: `cargo bench -p crdctl-bench --bench admission`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing, clippy::string_slice)]
#![allow(clippy::print_stdout)]

#[path = "common/targets.rs"]
mod targets;

// The shared load generator; this benchmark uses part of it.
#[allow(dead_code)]
#[path = "common/load.rs"]
mod load;

use std::sync::Arc;

use axum::Json;
use axum::routing::post;
use crdctl_conversion::{certs, framework};
use crdctl_server::testing::TestServer;
use load::{Load, Peer, Post};
use serde_json::{Value, json};

const SLICES: usize = 5;
const CONFIGURATIONS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// The first review the webhook was sent by the server, as sent: what the round trips post.
static SENT: std::sync::OnceLock<bytes::Bytes> = std::sync::OnceLock::new();

async fn allow(body: bytes::Bytes) -> Json<Value> {
    let review: Value = serde_json::from_slice(&body).unwrap();
    SENT.get_or_init(|| body);
    let uid = review["request"]["uid"].clone();
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": true}}),
    )
}

fn configuration(url: &str, ca_bundle: &str) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bench"},
        "webhooks": [{"name": "allow.example.com", "clientConfig": {"url": url, "caBundle": ca_bundle},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})
    .to_string()
}

/// Round trips/s: one client POSTing `review` to the webhook over one connection.
async fn round_trips(url: &str, ca_pem: &str, review: bytes::Bytes) -> f64 {
    let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap();
    let http = reqwest::Client::builder().add_root_certificate(ca).http1_only().build().unwrap();
    let (http, url) = (Arc::new(http), Arc::new(url.to_string()));
    load::rate(1, move |_, _| {
        let (http, url, review) = (Arc::clone(&http), Arc::clone(&url), review.clone());
        async move {
            let answer = http.post(url.as_str()).header("Content-Type", "application/json").body(review).send().await;
            // As any call does, the answer is read whole.
            let answer = answer.unwrap();
            assert!(answer.status().is_success());
            assert!(!answer.bytes().await.unwrap().is_empty());
        }
    })
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let bundle = certs::generate(&["127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = framework::Options::for_bundle("127.0.0.1:0".parse().unwrap(), &bundle, dir.path()).unwrap();
    let webhook_peer = Peer::new(1);
    let webhook = webhook_peer
        .run(async move {
            framework::start_app(options, axum::Router::new().route("/validate", post(allow))).await.unwrap()
        })
        .await;
    let url = format!("https://127.0.0.1:{}/validate", webhook.address.port());
    let server_peer = Peer::new(1);
    let server = server_peer
        .run(async {
            TestServer::start_with(Default::default(), Arc::new(crdctl_storage::memory::open())).await.unwrap()
        })
        .await;
    let load = Arc::new(Load::new(vec![server.url()]));
    let configuration = configuration(&url, &bundle.ca_bundle());

    // One create through the webhook first, for the review the server sends.
    let (code, _) = load.send(reqwest::Method::POST, CONFIGURATIONS, Some(configuration.clone())).await;
    assert_eq!(code, 201);
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first"},
        "data": {"host": "localhost", "port": "1234"}});
    let (code, _) =
        load.send(reqwest::Method::POST, "/api/v1/namespaces/default/configmaps", Some(first.to_string())).await;
    assert_eq!(code, 201);
    let (code, _) = load.send(reqwest::Method::DELETE, &format!("{CONFIGURATIONS}/bench"), None).await;
    assert_eq!(code, 200);
    let review = SENT.get().expect("the webhook was called").clone();
    println!("a validating admission webhook on ConfigMap creates (one client, in-memory store)");
    println!("  the review the server sends                     {:>5} bytes", review.len());
    let (mut none, mut trips, mut with) = (Vec::new(), Vec::new(), Vec::new());
    for slice in 0..SLICES {
        none.push(load.creates(Post::config_maps(), 1, None, &format!("none-{slice}")).await.0);
        // From the server's runtime, where the server's own calls start.
        let (trip_url, ca_pem, review) = (url.clone(), bundle.ca_pem.clone(), review.clone());
        trips.push(server_peer.run(async move { round_trips(&trip_url, &ca_pem, review).await }).await);
        let (code, _) = load.send(reqwest::Method::POST, CONFIGURATIONS, Some(configuration.clone())).await;
        assert_eq!(code, 201);
        with.push(load.creates(Post::config_maps(), 1, None, &format!("with-{slice}")).await.0);
        let (code, _) = load.send(reqwest::Method::DELETE, &format!("{CONFIGURATIONS}/bench"), None).await;
        assert_eq!(code, 200);
    }
    // Ten ValidatingAdmissionPolicies, each bound, each passing every ConfigMap create.
    let mut policies = Vec::new();
    for slice in 0..SLICES {
        let (code, _) = load.send(reqwest::Method::GET, "/api/v1/namespaces/default/configmaps?limit=1", None).await;
        assert_eq!(code, 200);
        let bare = load.creates(Post::config_maps(), 1, None, &format!("bare-{slice}")).await.0;
        for n in 0..POLICIES {
            let (code, _) = load.send(reqwest::Method::POST, POLICY_PATH, Some(policy(n))).await;
            assert_eq!(code, 201);
            let (code, _) = load.send(reqwest::Method::POST, BINDING_PATH, Some(binding(n))).await;
            assert_eq!(code, 201);
        }
        let bound = load.creates(Post::config_maps(), 1, None, &format!("bound-{slice}")).await.0;
        for n in 0..POLICIES {
            load.send(reqwest::Method::DELETE, &format!("{BINDING_PATH}/p{n}"), None).await;
            load.send(reqwest::Method::DELETE, &format!("{POLICY_PATH}/p{n}"), None).await;
        }
        policies.push(bound / bare);
    }
    let median = |rates: &mut Vec<f64>| {
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    };
    let (none, trips, with) = (median(&mut none), median(&mut trips), median(&mut with));
    let overhead_us = 1e6 / with - 1e6 / none;
    let trip_us = 1e6 / trips;
    println!("  creates/s, no webhook                          {none:>9.0}");
    println!("  creates/s, one validating webhook              {with:>9.0}   {:.2}× the rate without", with / none);
    println!("  HTTPS round trips/s to the webhook itself      {trips:>9.0}");
    let overhead = overhead_us / trip_us;
    println!(
        "  overhead per webhook call {overhead_us:.0} µs, round trip {trip_us:.0} µs: {overhead:.2}× (target ≤ 1.10)"
    );
    let policies = median(&mut policies);
    println!("  creates under {POLICIES} policy bindings ÷ with none  {policies:>9.2}× (target ≥ 0.9)");
    drop(server);
    let mut targets = targets::Targets::default();
    targets.expect(overhead <= 1.10, format!("webhook overhead {overhead:.2}× a round trip (≤ 1.10)"));
    targets.expect(policies >= 0.9, format!("{POLICIES} policies leave {policies:.2}× the rate (≥ 0.9)"));
    targets.finish();
}

const POLICIES: usize = 10;
const POLICY_PATH: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDING_PATH: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

fn policy(n: usize) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": format!("p{n}")},
        "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
            "validations": [{"expression": format!("!has(object.data) || size(object.data) < {}", 100 + n)}]}})
    .to_string()
}

fn binding(n: usize) -> String {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": format!("p{n}")}, "spec": {"policyName": format!("p{n}"), "validationActions": ["Deny"]}})
    .to_string()
}
