//! Conversion webhook throughput: reviews per second over loopback HTTPS (keep-alive) against
//! the same conversions done in-process, for reviews of 1 and 100 CronTabs.
//!
//! In-process is what the webhook does per review without the network: parse the review JSON,
//! convert every object, serialise the response. Over HTTPS, clients post the same serialised
//! review to the framework's server through TLS with keep-alive and read the whole answer, so
//! the rate is the server's; the client side is kept lean (its full API-server checks are timed
//! separately, as "client", one request at a time). HTTPS runs with one connection (sequential,
//! so latency includes every thread hand-off) and with two, which lets the server use both cores
//! of this machine while in-process uses one. The target is a server at least half as fast as
//! in-process for 100-object reviews.
//!
//! Run: `cargo bench -p crdctl-bench --bench conversion`.
#![allow(clippy::print_stdout)]

#[path = "../../../examples/crontab-conversion-webhook/convert.rs"]
mod convert;

use std::time::{Duration, Instant};

use crdctl_conversion::framework::{self, Options};
use crdctl_conversion::webhook::{DnsResolver, WebhookClient};
use crdctl_conversion::{ConversionReview, ReviewVersion, Shape};
use crdctl_model::crd::WebhookClientConfig;
use serde_json::{Value, json};

const RUN_FOR: Duration = Duration::from_secs(2);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let names = vec!["localhost".to_string()];
    let bundle = crdctl_conversion::certs::generate(&names).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &bundle.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &bundle.key_pem).unwrap();
    let options = Options::new("127.0.0.1:0".parse().unwrap(), dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let server = framework::start(options, convert::convert_crontab).await.unwrap();
    let config = WebhookClientConfig {
        url: Some(format!("https://localhost:{}/crdconvert", server.address.port())),
        service: None,
        ca_bundle: Some(bundle.ca_bundle()),
    };
    let client = WebhookClient::new(&config, &["v1".into()], &DnsResolver).unwrap();
    let http = raw_client(&bundle);
    let url = format!("https://localhost:{}/crdconvert?timeout=30s", server.address.port());

    println!(
        "{:>8} {:>12} {:>24} {:>12} {:>24} {:>8} {:>10}",
        "objects", "in-process/s", "p50 / p99", "https/s", "p50 / p99", "ratio", "client/s"
    );
    for n_objects in [1, 100] {
        let objects = crontabs(n_objects);
        let local = in_process(&objects);
        println!("{n_objects:>8} {:>12.0} {:>24}", local.per_second, latency(&local));
        for connections in [1, 2] {
            let remote = over_https(&http, &url, &objects, connections).await;
            let ratio = remote.per_second / local.per_second;
            println!(
                "{:>8} {:>12} {:>24} {:>12.0} {:>24} {:>7.1}%",
                "",
                format!("{connections} conn"),
                "",
                remote.per_second,
                latency(&remote),
                ratio * 100.0
            );
        }
        let full_client = tokio::spawn({
            let (client, objects) = (client.clone(), objects.clone());
            async move { through_client(&client, &objects).await }
        })
        .await
        .unwrap();
        println!(
            "{:>8} {:>12} {:>24} {:>12} {:>24} {:>8} {:>10.0}",
            "",
            "client",
            "",
            "",
            latency(&full_client),
            "",
            full_client.per_second
        );
    }
    server.shutdown().await.unwrap();
}

struct Rate {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

fn crontabs(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "apiVersion": "example.com/v1beta1",
                "kind": "CronTab",
                "metadata": {"name": format!("crontab-{i}"), "namespace": "default", "uid": format!("00000000-0000-0000-0000-{i:012}"), "resourceVersion": "143", "labels": {"app": "bench"}},
                "hostPort": format!("host-{i}.example.com:{}", 1000 + i)
            })
        })
        .collect()
}

/// Parse, convert, serialise: the webhook's work without the network, on one core.
fn in_process(objects: &[Value]) -> Rate {
    let request =
        serde_json::to_vec(&ConversionReview::request(ReviewVersion::V1, "uid", "example.com/v1", objects.to_vec()))
            .unwrap();
    let mut latencies = Vec::new();
    let started = Instant::now();
    while started.elapsed() < RUN_FOR {
        let t = Instant::now();
        let review: ConversionReview = serde_json::from_slice(&request).unwrap();
        let request = review.request.unwrap();
        let converted: Vec<Value> = request
            .objects
            .into_iter()
            .map(|o| convert::convert_crontab(o, &request.desired_api_version).unwrap())
            .collect();
        let response =
            serde_json::to_vec(&ConversionReview::success(ReviewVersion::V1, &request.uid, converted)).unwrap();
        std::hint::black_box(response);
        latencies.push(t.elapsed());
    }
    rate(latencies, started.elapsed())
}

/// The same serialised review posted over HTTPS with keep-alive from `connections` concurrent tasks.
async fn over_https(http: &reqwest::Client, url: &str, objects: &[Value], connections: usize) -> Rate {
    let body =
        serde_json::to_vec(&ConversionReview::request(ReviewVersion::V1, "uid", "example.com/v1", objects.to_vec()))
            .unwrap();
    // Warm up the connections, and check once that the answer is right.
    for _ in 0..20 {
        let answer = post(http, url, &body).await;
        let review: ConversionReview = serde_json::from_slice(&answer).unwrap();
        assert_eq!(review.response.unwrap().converted_objects.unwrap().len(), objects.len());
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (http, url, body) = (http.clone(), url.to_string(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while started.elapsed() < RUN_FOR {
                let t = Instant::now();
                std::hint::black_box(post(&http, &url, &body).await);
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    rate(latencies, started.elapsed())
}

async fn post(http: &reqwest::Client, url: &str, body: &[u8]) -> bytes::Bytes {
    let reply = http.post(url).header("Content-Type", "application/json").body(body.to_vec()).send().await.unwrap();
    assert!(reply.status().is_success());
    reply.bytes().await.unwrap()
}

/// The full API-server side: the webhook client with every check on the answer, one at a time.
async fn through_client(client: &WebhookClient, objects: &[Value]) -> Rate {
    let mut latencies = Vec::new();
    let started = Instant::now();
    while started.elapsed() < RUN_FOR {
        let t = Instant::now();
        std::hint::black_box(client.convert(objects.to_vec(), "example.com/v1", Shape::List).await.unwrap());
        latencies.push(t.elapsed());
    }
    rate(latencies, started.elapsed())
}

fn raw_client(bundle: &crdctl_conversion::certs::Bundle) -> reqwest::Client {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(bundle.ca_pem.as_bytes()).unwrap()).unwrap();
    let tls = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    reqwest::Client::builder().tls_backend_preconfigured(tls).http1_only().build().unwrap()
}

fn rate(mut latencies: Vec<Duration>, elapsed: Duration) -> Rate {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Rate { per_second: latencies.len() as f64 / elapsed.as_secs_f64(), p50: at(0.50), p99: at(0.99) }
}

fn latency(rate: &Rate) -> String {
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    format!("{:.1}µs / {:.1}µs", micros(rate.p50), micros(rate.p99))
}
